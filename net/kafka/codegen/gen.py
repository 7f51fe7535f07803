#!/usr/bin/env python3
"""Generates samsa's Kafka message codecs (C++) from net/kafka/schema/*.ks.

Usage:
  gen.py --out DIR SCHEMA.ks...     write the generated sources into DIR
  gen.py --list SCHEMA.ks...        print the file names it would write (for CMake)

Stdlib only: the build runs it with whatever python3 it finds. The schema format is
described in net/kafka/README.md; this file is its only reader.
"""

import argparse
import os
import re
import sys

INT16_MAX = 32767

# name -> (C++ type, wire size, Reader/Writer method)
FIXED = {
    'int8': ('std::int8_t', 1, 'i8'),
    'int16': ('std::int16_t', 2, 'i16'),
    'int32': ('std::int32_t', 4, 'i32'),
    'int64': ('std::int64_t', 8, 'i64'),
    'uint16': ('std::uint16_t', 2, 'u16'),
    'uint32': ('std::uint32_t', 4, 'u32'),
    'float64': ('double', 8, 'f64'),
    'bool': ('bool', 1, 'boolean'),
    'uuid': ('Uuid', 16, 'uuid'),
}
INT_RANGES = {
    'int8': (-(1 << 7), (1 << 7) - 1),
    'int16': (-(1 << 15), (1 << 15) - 1),
    'int32': (-(1 << 31), (1 << 31) - 1),
    'int64': (-(1 << 63), (1 << 63) - 1),
    'uint16': (0, (1 << 16) - 1),
    'uint32': (0, (1 << 32) - 1),
}
CPP_KEYWORDS = {
    'alignas', 'alignof', 'and', 'asm', 'auto', 'bool', 'break', 'case', 'catch', 'char',
    'class', 'const', 'continue', 'default', 'delete', 'do', 'double', 'else', 'enum',
    'explicit', 'export', 'extern', 'false', 'float', 'for', 'friend', 'goto', 'if', 'inline',
    'int', 'long', 'mutable', 'namespace', 'new', 'noexcept', 'not', 'operator', 'or',
    'private', 'protected', 'public', 'register', 'return', 'short', 'signed', 'sizeof',
    'static', 'struct', 'switch', 'template', 'this', 'throw', 'true', 'try', 'typedef',
    'typename', 'union', 'unsigned', 'using', 'virtual', 'void', 'volatile', 'while', 'xor',
    # the generated structs' own member functions
    'decode', 'encode', 'encoded_size',
}


class SchemaError(Exception):
    pass


# --------------------------------------------------------------------------------------------
# Version ranges


class Range:
    """An inclusive version range; empty when lo > hi."""

    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi

    @staticmethod
    def parse(text, where):
        text = text.strip()
        if text == 'none':
            return Range(1, 0)
        m = re.fullmatch(r'(\d+)\+', text)
        if m:
            return Range(int(m.group(1)), INT16_MAX)
        m = re.fullmatch(r'(\d+)-(\d+)', text)
        if m:
            r = Range(int(m.group(1)), int(m.group(2)))
            if r.lo > r.hi:
                raise SchemaError(f'{where}: empty version range {text}')
            return r
        m = re.fullmatch(r'(\d+)', text)
        if m:
            return Range(int(m.group(1)), int(m.group(1)))
        raise SchemaError(f'{where}: bad version range {text!r}')

    def empty(self):
        return self.lo > self.hi

    def intersect(self, o):
        return Range(max(self.lo, o.lo), min(self.hi, o.hi))

    def contains(self, v):
        return self.lo <= v <= self.hi

    def covers(self, o):
        return o.empty() or (self.lo <= o.lo and o.hi <= self.hi)

    def __str__(self):
        if self.empty():
            return 'none'
        if self.hi == INT16_MAX:
            return f'{self.lo}+'
        return f'{self.lo}-{self.hi}'

    def cond(self, within):
        """C++ test of `version` for this range, knowing version is inside `within`."""
        r = self.intersect(within)
        if r.empty():
            return 'false'
        parts = []
        if r.lo > within.lo:
            parts.append(f'version >= {r.lo}')
        if r.hi < within.hi:
            parts.append(f'version <= {r.hi}')
        if not parts:
            return 'true'
        if len(parts) == 2 and r.lo == r.hi:
            return f'version == {r.lo}'
        return ' && '.join(parts)


# --------------------------------------------------------------------------------------------
# Schema model and parser


class Type:
    def __init__(self, kind, name=None, elem=None):
        self.kind = kind  # fixed | string | bytes | records | array | struct
        self.name = name  # fixed type name or struct name
        self.elem = elem  # array element Type
        self.struct = None  # StructDef, resolved after parsing

    def is_fixed(self):
        return self.kind == 'fixed'


class Field:
    def __init__(self, name, type_text, versions, attrs, where):
        self.name = name
        self.type_text = type_text
        self.versions = versions
        self.where = where
        self.nullable = Range(1, 0)
        self.tag = None
        self.tagged = None
        self.default = None
        self.flex = None
        self.children = []
        for key, value in attrs:
            if key == 'null':
                self.nullable = Range.parse(value, where)
            elif key == 'tag':
                if not re.fullmatch(r'\d+', value):
                    raise SchemaError(f'{where}: tag must be a number')
                self.tag = int(value)
            elif key == 'tagged':
                self.tagged = Range.parse(value, where)
            elif key == 'default':
                self.default = value
            elif key == 'flex':
                self.flex = Range.parse(value, where)
            else:
                raise SchemaError(f'{where}: unknown attribute {key!r}')
        if self.tag is not None and self.tagged is None:
            self.tagged = versions
        if self.tagged is not None and self.tag is None:
            raise SchemaError(f'{where}: tagged= needs tag=')
        self.type = None

    # Versions in which the field is written as a regular (positional) field.
    def regular(self):
        if self.tag is None:
            return self.versions
        # A field may be positional in early versions and tagged later; never both at once.
        if self.tagged.lo <= self.versions.lo:
            return Range(1, 0)
        return Range(self.versions.lo, min(self.versions.hi, self.tagged.lo - 1))

    def tagged_range(self):
        if self.tag is None:
            return Range(1, 0)
        return self.tagged.intersect(self.versions)

    def member(self):
        return member_name(self.name)


class StructDef:
    def __init__(self, name, fields, common, where):
        self.name = name
        self.fields = fields
        self.common = common
        self.where = where


class Message:
    def __init__(self, kind, name, api_key, versions, flexible, path):
        self.kind = kind  # request | response | header
        self.name = name
        self.api_key = api_key
        self.versions = versions
        self.flexible = flexible
        self.path = path
        self.fields = []
        self.structs = {}  # name -> StructDef (inline and common)
        self.comments = []

    def first_flexible(self):
        f = self.flexible.intersect(Range(0, INT16_MAX))
        return -1 if f.empty() else f.lo

    def file_stem(self):
        return snake(self.name)


def snake(name):
    s = re.sub(r'([a-z0-9])([A-Z])', r'\1_\2', name)
    s = re.sub(r'([A-Z]+)([A-Z][a-z])', r'\1_\2', s)
    return s.lower()


def member_name(name):
    m = snake(name)
    if m in CPP_KEYWORDS:
        m += '_'
    return m


def tokenize(rest, where):
    """Splits 'a=b c="d e"' into tokens, honouring double quotes."""
    tokens = []
    i = 0
    while i < len(rest):
        if rest[i].isspace():
            i += 1
            continue
        j = i
        while j < len(rest) and not rest[j].isspace():
            if rest[j] == '"':
                k = rest.find('"', j + 1)
                if k < 0:
                    raise SchemaError(f'{where}: unterminated string')
                j = k + 1
            else:
                j += 1
        tokens.append(rest[i:j])
        i = j
    return tokens


def strip_comment(line):
    out = []
    quoted = False
    for ch in line:
        if ch == '"':
            quoted = not quoted
        if ch == '#' and not quoted:
            break
        out.append(ch)
    return ''.join(out).rstrip()


def parse_kv(tokens, where):
    kv = []
    for t in tokens:
        if '=' not in t:
            raise SchemaError(f'{where}: expected key=value, got {t!r}')
        k, v = t.split('=', 1)
        kv.append((k, v))
    return kv


def parse_file(path):
    with open(path, encoding='utf-8') as f:
        lines = f.read().split('\n')
    msg = None
    comments = []
    # stack of (indent, children list)
    stack = []
    current_common = None
    for lineno, raw in enumerate(lines, 1):
        where = f'{path}:{lineno}'
        if raw.startswith('#') and msg is None:
            comments.append(raw[1:].strip())
        line = strip_comment(raw)
        if not line.strip():
            continue
        if '\t' in line:
            raise SchemaError(f'{where}: tabs are not allowed; indent with two spaces')
        indent = len(line) - len(line.lstrip(' '))
        tokens = tokenize(line.strip(), where)
        head = tokens[0]
        if indent == 0 and head in ('request', 'response', 'header'):
            if msg is not None:
                raise SchemaError(f'{where}: one message per file')
            if len(tokens) < 2:
                raise SchemaError(f'{where}: message name missing')
            kv = dict(parse_kv(tokens[2:], where))
            for k in kv:
                if k not in ('key', 'versions', 'flexible'):
                    raise SchemaError(f'{where}: unknown message attribute {k!r}')
            if head != 'header' and 'key' not in kv:
                raise SchemaError(f'{where}: key= missing')
            if 'versions' not in kv or 'flexible' not in kv:
                raise SchemaError(f'{where}: versions= and flexible= are required')
            msg = Message(head, tokens[1], int(kv['key']) if 'key' in kv else None,
                          Range.parse(kv['versions'], where), Range.parse(kv['flexible'], where),
                          path)
            msg.comments = comments
            stack = [(-2, msg.fields)]
            continue
        if msg is None:
            raise SchemaError(f'{where}: the file must start with request/response/header')
        if indent == 0 and head == 'struct':
            if len(tokens) != 2:
                raise SchemaError(f'{where}: struct NAME')
            name = tokens[1]
            if name in msg.structs:
                raise SchemaError(f'{where}: struct {name} defined twice')
            current_common = StructDef(name, [], True, where)
            msg.structs[name] = current_common
            stack = [(0, current_common.fields)]
            continue
        if indent % 2:
            raise SchemaError(f'{where}: indentation must be a multiple of two spaces')
        while stack and indent <= stack[-1][0]:
            stack.pop()
        if not stack or indent != stack[-1][0] + 2:
            raise SchemaError(f'{where}: unexpected indentation')
        if len(tokens) < 3:
            raise SchemaError(f'{where}: expected NAME TYPE vVERSIONS [attributes]')
        name, type_text, vtext = tokens[0], tokens[1], tokens[2]
        if not re.fullmatch(r'[A-Za-z][A-Za-z0-9]*', name):
            raise SchemaError(f'{where}: bad field name {name!r}')
        if not vtext.startswith('v'):
            raise SchemaError(f'{where}: versions must look like v3+, v0-4 or v2')
        field = Field(name, type_text, Range.parse(vtext[1:], where), parse_kv(tokens[3:], where),
                      where)
        stack[-1][1].append(field)
        stack.append((indent, field.children))
    if msg is None:
        raise SchemaError(f'{path}: no message')
    resolve(msg)
    return msg


def resolve(msg):
    """Resolves types, registers inline structs and checks the rules of the format."""

    def make_type(text, field):
        if text.startswith('[]'):
            inner = text[2:]
            if inner in ('records', 'bytes') or inner.startswith('[]'):
                raise SchemaError(f'{field.where}: arrays of {inner} are not supported')
            return Type('array', elem=make_type(inner, field))
        if text in FIXED:
            return Type('fixed', text)
        if text in ('string', 'bytes', 'records'):
            return Type(text)
        if re.fullmatch(r'[A-Z][A-Za-z0-9]*', text):
            return Type('struct', text)
        raise SchemaError(f'{field.where}: unknown type {text!r}')

    def walk(fields, owner):
        names = set()
        tags = set()
        for f in fields:
            if f.name in names:
                raise SchemaError(f'{f.where}: field {f.name} repeated in {owner}')
            names.add(f.name)
            f.type = make_type(f.type_text, f)
            base = f.type.elem if f.type.kind == 'array' else f.type
            if base.kind == 'struct':
                if f.children:
                    if base.name in msg.structs:
                        raise SchemaError(f'{f.where}: struct {base.name} defined twice')
                    msg.structs[base.name] = StructDef(base.name, f.children, False, f.where)
                    walk(f.children, base.name)
            elif f.children:
                raise SchemaError(f'{f.where}: only struct types have nested fields')
            check_field(f)
            if f.tag is not None:
                if f.tag in tags:
                    raise SchemaError(f'{f.where}: tag {f.tag} repeated in {owner}')
                tags.add(f.tag)

    def check_field(f):
        t = f.type
        if f.versions.empty():
            raise SchemaError(f'{f.where}: field present in no version')
        if not f.nullable.empty():
            if t.kind == 'fixed' and t.name != 'uuid':
                raise SchemaError(f'{f.where}: {t.name} cannot be nullable')
            if t.kind == 'fixed':
                raise SchemaError(f'{f.where}: nullable uuid is not supported')
        if f.tag is not None:
            if not msg.flexible.covers(f.tagged_range()):
                raise SchemaError(f'{f.where}: tagged in versions that are not flexible')
            if f.tagged.hi != INT16_MAX:
                raise SchemaError(f'{f.where}: tagged versions must be open-ended')
        if f.flex is not None and f.tag is not None:
            raise SchemaError(f'{f.where}: flex= on a tagged field')
        if f.default is not None:
            check_default(f)

    def check_default(f):
        t, d = f.type, f.default
        if d == 'null':
            if f.nullable.empty() or not f.nullable.covers(f.versions):
                raise SchemaError(f'{f.where}: default=null needs the field nullable in all versions')
            if t.kind not in ('string', 'array', 'struct', 'bytes'):
                raise SchemaError(f'{f.where}: default=null on {t.kind}')
            return
        if t.kind == 'fixed' and t.name in INT_RANGES:
            try:
                v = int(d, 0)
            except ValueError:
                raise SchemaError(f'{f.where}: default {d!r} is not an integer')
            lo, hi = INT_RANGES[t.name]
            if not lo <= v <= hi:
                raise SchemaError(f'{f.where}: default {d} out of range for {t.name}')
            return
        if t.kind == 'fixed' and t.name == 'bool':
            if d not in ('true', 'false'):
                raise SchemaError(f'{f.where}: bool default must be true or false')
            return
        if t.kind == 'fixed' and t.name == 'float64':
            try:
                float(d)
            except ValueError:
                raise SchemaError(f'{f.where}: bad float default {d!r}')
            return
        if t.kind == 'string':
            if not (len(d) >= 2 and d[0] == '"' and d[-1] == '"'):
                raise SchemaError(f'{f.where}: string defaults are quoted: {d!r}')
            if '\\' in d:
                raise SchemaError(f'{f.where}: escapes are not supported in defaults')
            return
        raise SchemaError(f'{f.where}: {t.kind} fields take no default')

    walk(msg.fields, msg.name)
    for s in list(msg.structs.values()):
        if s.common:
            walk(s.fields, s.name)

    def bind(fields):
        for f in fields:
            base = f.type.elem if f.type.kind == 'array' else f.type
            if base.kind == 'struct':
                if base.name not in msg.structs:
                    raise SchemaError(f'{f.where}: unknown struct {base.name}')
                base.struct = msg.structs[base.name]

    for s in msg.structs.values():
        bind(s.fields)
    bind(msg.fields)
    if msg.versions.empty():
        raise SchemaError(f'{msg.path}: no valid version')


# --------------------------------------------------------------------------------------------
# C++ generation helpers


class Ctx:
    """What the generator knows while emitting one struct's functions."""

    def __init__(self, msg):
        self.msg = msg
        self.valid = msg.versions

    def flex_expr(self, f):
        """C++ expression: is this field compact in `version`?"""
        if f.flex is not None:
            return f.flex.cond(self.valid)
        return 'flex'

    def nullable_expr(self, f):
        return f.nullable.intersect(f.versions).cond(self.valid)


def is_optional(f):
    """The C++ member is std::optional: some version allows null (records carry their own null)."""
    return (not f.nullable.empty()) and f.type.kind != 'records'


def cpp_base(t):
    if t.kind == 'fixed':
        return FIXED[t.name][0]
    if t.kind == 'string':
        return 'std::string'
    if t.kind == 'bytes':
        return 'Bytes'
    if t.kind == 'records':
        return 'Records'
    if t.kind == 'array':
        return f'std::vector<{cpp_base(t.elem)}>'
    return t.name


def cpp_type(f):
    b = cpp_base(f.type)
    return f'std::optional<{b}>' if is_optional(f) else b


def int_literal(type_name, v):
    lo, hi = INT_RANGES[type_name]
    ctype = FIXED[type_name][0]
    if v == lo and v != 0:
        return f'std::numeric_limits<{ctype}>::min()'
    if type_name in ('int64',) and abs(v) > (1 << 31):
        return f'INT64_C({v})'
    if type_name == 'uint32':
        return f'{v}u'
    return str(v)


def default_expr(f):
    """Initializer of the member (without '= '), or None for value-initialisation."""
    t, d = f.type, f.default
    if d == 'null':
        return 'std::nullopt'
    if t.kind == 'fixed':
        if t.name in INT_RANGES:
            return int_literal(t.name, int(d, 0)) if d is not None else '0'
        if t.name == 'bool':
            return d if d is not None else 'false'
        if t.name == 'float64':
            return repr(float(d)) if d is not None else '0.0'
        return None  # uuid: zero
    if t.kind == 'string':
        if d is None or d == '""':
            return 'std::string()' if is_optional(f) else None
        return f'std::string({d})'
    if t.kind == 'records':
        return None  # null
    if is_optional(f):
        return f'{cpp_base(t)}()'
    return None


def differs_from_default(f, x):
    """C++ expression: x (the member) holds something other than its default."""
    t, d = f.type, f.default
    opt = is_optional(f)
    if t.kind == 'records':
        return f'!{x}.is_null()'
    if d == 'null':
        return f'{x}.has_value()'
    if t.kind == 'fixed':
        if t.name == 'uuid':
            return f'{x} != Uuid{{}}'
        return f'{x} != {default_expr(f)}'
    if t.kind == 'string' and d is not None and d != '""':
        if opt:
            return f'(!{x} || *{x} != {d})'
        return f'{x} != {d}'
    if t.kind in ('string', 'bytes', 'array'):
        if opt:
            return f'(!{x} || !{x}->empty())'
        return f'!{x}.empty()'
    # struct
    if opt:
        return f'(!{x} || !(*{x} == {t.name}{{}}))'
    return f'!({x} == {t.name}{{}})'


def type_min(msg, t, compact, nullable, v):
    """The fewest bytes a value of type t can take in version v."""
    if t.kind == 'fixed':
        return FIXED[t.name][1]
    if t.kind == 'string':
        return 1 if compact else 2
    if t.kind in ('bytes', 'records', 'array'):
        return 1 if compact else 4
    return 1 if nullable else struct_min(msg, t.struct, v)


def struct_min(msg, s, v):
    flex = msg.flexible.contains(v)
    total = 1 if flex else 0  # the tagged-field count
    for f in s.fields:
        if f.regular().contains(v):
            compact = flex if f.flex is None else f.flex.contains(v)
            total += type_min(msg, f.type, compact, f.nullable.contains(v), v)
    return total


def elem_min(msg, f):
    """A lower bound on the size of one element of array field f, over the versions that have
    it; the decoder rejects counts the remaining input cannot hold."""
    best = None
    for rng, tagged in ((f.regular(), False), (f.tagged_range(), True)):
        r = rng.intersect(msg.versions)
        for v in range(r.lo, r.hi + 1):
            compact = True if tagged else (
                msg.flexible.contains(v) if f.flex is None else f.flex.contains(v))
            m = type_min(msg, f.type.elem, compact, False, v)
            best = m if best is None else min(best, m)
    return max(1, best or 0)


class Out:
    def __init__(self):
        self.lines = []
        self.level = 0

    def __call__(self, text=''):
        if text:
            self.lines.append('  ' * self.level + text)
        else:
            self.lines.append('')

    def indent(self):
        self.level += 1

    def dedent(self):
        self.level -= 1

    def text(self):
        return '\n'.join(self.lines) + '\n'


def struct_order(msg):
    """Structs in definition order: every struct after the structs its fields use."""
    order = []
    state = {}

    def visit(s):
        if state.get(s.name) == 'done':
            return
        if state.get(s.name) == 'active':
            raise SchemaError(f'{s.where}: struct {s.name} contains itself')
        state[s.name] = 'active'
        for f in s.fields:
            base = f.type.elem if f.type.kind == 'array' else f.type
            if base.kind == 'struct':
                visit(base.struct)
        state[s.name] = 'done'
        order.append(s)

    for s in msg.structs.values():
        if s.common:
            visit(s)
    top = StructDef(msg.name, msg.fields, False, msg.path)
    for f in msg.fields:
        base = f.type.elem if f.type.kind == 'array' else f.type
        if base.kind == 'struct':
            visit(base.struct)
    for s in msg.structs.values():
        visit(s)
    return order, top


# ---- decode ----


def emit_read_value(o, ctx, f, t, x, reader, compact, nullable, opt, version_var='version'):
    """Reads one value of type t into lvalue x."""
    if t.kind == 'fixed':
        if t.name == 'uuid':
            o(f'{reader}.uuid({x});')
        else:
            o(f'{x} = {reader}.{FIXED[t.name][2]}();')
    elif t.kind == 'string':
        if opt:
            o(f'{reader}.nullable_string({x}, {compact}, {nullable});')
        else:
            o(f'{reader}.string({x}, {compact});')
    elif t.kind == 'bytes':
        if opt:
            o(f'{reader}.nullable_bytes({x}, {compact}, {nullable});')
        else:
            o(f'{reader}.bytes({x}, {compact});')
    elif t.kind == 'records':
        o(f'{reader}.records({x}, {compact}, {nullable});')
    elif t.kind == 'array':
        e = t.elem
        minsize = elem_min(ctx.msg, f)
        o('{')
        o.indent()
        o(f'const std::int32_t count = {reader}.array_length({compact}, {nullable}, {minsize});')
        if opt:
            o('if (count < 0) {')
            o.indent()
            o(f'{x}.reset();')
            o.dedent()
            o('} else {')
            o.indent()
            o(f'auto& items = {x}.emplace();')
        else:
            o(f'auto& items = {x};')
        o('items.clear();')
        o(f'if ({reader}.charge_items(items, count)) items.reserve(static_cast<std::size_t>(count < 0 ? 0 : count));')
        o(f'for (std::int32_t i = 0; i < count && {reader}.ok(); ++i) {{')
        o.indent()
        if e.kind == 'fixed' and e.name != 'uuid':
            o(f'items.push_back({reader}.{FIXED[e.name][2]}());')
        elif e.kind == 'struct':
            o(f'items.emplace_back().decode({reader}, {version_var});')
        else:
            emit_read_value(o, ctx, f, e, 'items.emplace_back()', reader, compact, 'false', False)
        o.dedent()
        o('}')
        if opt:
            o.dedent()
            o('}')
        o.dedent()
        o('}')
    else:  # struct
        if opt:
            if nullable == 'false':
                o(f'{x}.emplace().decode({reader}, {version_var});')
            else:
                cond = '' if nullable == 'true' else f'!({nullable}) || '
                o(f'if ({cond}{reader}.i8() >= 0) {{')
                o.indent()
                o(f'{x}.emplace().decode({reader}, {version_var});')
                o.dedent()
                o('} else {')
                o.indent()
                o(f'{x}.reset();')
                o.dedent()
                o('}')
        else:
            o(f'{x}.decode({reader}, {version_var});')


def emit_decode_body(o, ctx, fields):
    o(f'[[maybe_unused]] const bool flex = {ctx.msg.flexible.cond(ctx.valid)};')
    for f in fields:
        reg = f.regular()
        cond = reg.cond(ctx.valid)
        if cond == 'false':
            continue
        if cond != 'true':
            o(f'if ({cond}) {{')
            o.indent()
        emit_read_value(o, ctx, f, f.type, 'this->' + f.member(), 'r', ctx.flex_expr(f),
                        ctx.nullable_expr(f), is_optional(f))
        if cond != 'true':
            o.dedent()
            o('}')
    tagged = [f for f in fields if f.tag is not None and f.tagged_range().cond(ctx.valid) != 'false']
    if ctx.msg.flexible.cond(ctx.valid) == 'false':
        return
    o('if (flex) {')
    o.indent()
    o('const std::uint32_t tags = r.uvarint32();')
    o('for (std::uint32_t t = 0; t < tags && r.ok(); ++t) {')
    o.indent()
    o('const std::uint32_t tag = r.uvarint32();')
    o('Reader field = r.sub(r.uvarint32());')
    if tagged:
        o('switch (tag) {')
        o.indent()
        for f in sorted(tagged, key=lambda f: f.tag):
            cond = f.tagged_range().cond(ctx.valid)
            o(f'case {f.tag}:')
            o.indent()
            if cond != 'true':
                o(f'if (!({cond})) break;  // not this field in this version: skipped')
            emit_read_value(o, ctx, f, f.type, 'this->' + f.member(), 'field', 'true',
                            ctx.nullable_expr(f), is_optional(f))
            o('r.end_sub(field);')
            o('break;')
            o.dedent()
        o('default:')
        o.indent()
        o('break;  // unknown tagged fields are skipped')
        o.dedent()
        o.dedent()
        o('}')
    else:
        o('(void)tag;  // no known tagged fields: all are skipped')
        o('(void)field;')
    o.dedent()
    o('}')
    o.dedent()
    o('}')


# ---- encode ----


def emit_write_value(o, ctx, f, t, x, compact, nullable, opt):
    if t.kind == 'fixed':
        o(f'w.{FIXED[t.name][2]}({x});')
    elif t.kind == 'string':
        if opt:
            o(f'w.nullable_string({x}, {compact}, {nullable});')
        else:
            o(f'w.string({x}, {compact});')
    elif t.kind == 'bytes':
        if opt:
            o(f'w.nullable_bytes({x}, {compact}, {nullable});')
        else:
            o(f'w.bytes({x}, {compact});')
    elif t.kind == 'records':
        o(f'w.records({x}, {compact}, {nullable});')
    elif t.kind == 'array':
        e = t.elem
        if opt:
            o(f'if (!{x}) {{')
            o.indent()
            o(f'w.null_length({compact}, {nullable});')
            o.dedent()
            o('} else {')
            o.indent()
            items = f'(*{x})'
        else:
            items = x
        o(f'w.array_length({items}.size(), {compact});')
        o(f'for (const auto& item : {items}) {{')
        o.indent()
        if e.kind == 'struct':
            o('item.encode(w, version);')
        else:
            emit_write_value(o, ctx, f, e, 'item', compact, 'false', False)
        o.dedent()
        o('}')
        if opt:
            o.dedent()
            o('}')
    else:  # struct
        if opt:
            if nullable == 'false':
                o(f'({x} ? *{x} : {t.name}{{}}).encode(w, version);')
            else:
                body_null = f'w.i8(-1);' if nullable == 'true' else \
                    f'if ({nullable}) {{ w.i8(-1); }} else {{ {t.name}{{}}.encode(w, version); }}'
                o(f'if (!{x}) {{')
                o.indent()
                o(body_null)
                o.dedent()
                o('} else {')
                o.indent()
                if nullable != 'true':
                    o(f'if ({nullable}) w.i8(1);')
                else:
                    o('w.i8(1);')
                o(f'{x}->encode(w, version);')
                o.dedent()
                o('}')
        else:
            o(f'{x}.encode(w, version);')


def size_expr(ctx, f, t, x, compact, nullable, opt, acc, o):
    """Emits statements adding the encoded size of x to acc."""
    if t.kind == 'fixed':
        o(f'{acc} += {FIXED[t.name][1]};')
    elif t.kind == 'string':
        if opt:
            o(f'{acc} += Writer::string_size({x} ? {x}->size() : 0, {compact});')
        else:
            o(f'{acc} += Writer::string_size({x}.size(), {compact});')
    elif t.kind == 'bytes':
        if opt:
            o(f'{acc} += Writer::bytes_size({x} ? {x}->size() : 0, {compact});')
        else:
            o(f'{acc} += Writer::bytes_size({x}.size(), {compact});')
    elif t.kind == 'records':
        o(f'{acc} += Writer::bytes_size({x}.size(), {compact});')
    elif t.kind == 'array':
        e = t.elem
        if opt:
            o(f'if ({x}) {{')
            o.indent()
            items = f'(*{x})'
        else:
            items = x
        o(f'{acc} += Writer::length_size({items}.size(), {compact});')
        if e.kind == 'fixed':
            o(f'{acc} += {items}.size() * {FIXED[e.name][1]};')
        elif e.kind == 'struct':
            o(f'for (const auto& item : {items}) {acc} += item.encoded_size(version);')
        else:
            o(f'for (const auto& item : {items}) {{')
            o.indent()
            size_expr(ctx, f, e, 'item', compact, 'false', False, acc, o)
            o.dedent()
            o('}')
        if opt:
            o.dedent()
            o('} else {')
            o.indent()
            o(f'{acc} += Writer::length_size(0, {compact});')
            o.dedent()
            o('}')
    else:
        if opt:
            if nullable != 'false':
                o(f'if ({nullable}) {acc} += 1;')
            if nullable == 'true':
                o(f'if ({x}) {acc} += {x}->encoded_size(version);')
            else:
                o(f'if ({x}) {{')
                o.indent()
                o(f'{acc} += {x}->encoded_size(version);')
                o.dedent()
                o(f'}} else if (!({nullable})) {{')
                o.indent()
                o(f'{acc} += {t.name}{{}}.encoded_size(version);')
                o.dedent()
                o('}')
        else:
            o(f'{acc} += {x}.encoded_size(version);')


def tagged_present(ctx, f):
    cond = f.tagged_range().cond(ctx.valid)
    diff = differs_from_default(f, 'this->' + f.member())
    return diff if cond == 'true' else f'({cond}) && {diff}'


def emit_encode_body(o, ctx, fields):
    o(f'[[maybe_unused]] const bool flex = {ctx.msg.flexible.cond(ctx.valid)};')
    for f in fields:
        cond = f.regular().cond(ctx.valid)
        if cond == 'false':
            continue
        if cond != 'true':
            o(f'if ({cond}) {{')
            o.indent()
        emit_write_value(o, ctx, f, f.type, 'this->' + f.member(), ctx.flex_expr(f),
                         ctx.nullable_expr(f), is_optional(f))
        if cond != 'true':
            o.dedent()
            o('}')
    if ctx.msg.flexible.cond(ctx.valid) == 'false':
        return
    tagged = sorted([f for f in fields
                     if f.tag is not None and f.tagged_range().cond(ctx.valid) != 'false'],
                    key=lambda f: f.tag)
    o('if (flex) {')
    o.indent()
    if not tagged:
        o('w.uvarint(0);  // no tagged fields')
    else:
        o('std::uint32_t tags = 0;')
        for i, f in enumerate(tagged):
            o(f'const bool has{i} = {tagged_present(ctx, f)};')
            o(f'tags += has{i};')
        o('w.uvarint(tags);')
        for i, f in enumerate(tagged):
            o(f'if (has{i}) {{')
            o.indent()
            o(f'w.uvarint({f.tag});')
            o('std::size_t size = 0;')
            size_expr(ctx, f, f.type, 'this->' + f.member(), 'true', ctx.nullable_expr(f),
                      is_optional(f), 'size', o)
            o('w.uvarint(static_cast<std::uint32_t>(size));')
            emit_write_value(o, ctx, f, f.type, 'this->' + f.member(), 'true', ctx.nullable_expr(f),
                             is_optional(f))
            o.dedent()
            o('}')
    o.dedent()
    o('}')


def emit_size_body(o, ctx, fields):
    o(f'[[maybe_unused]] const bool flex = {ctx.msg.flexible.cond(ctx.valid)};')
    o('std::size_t n = 0;')
    for f in fields:
        cond = f.regular().cond(ctx.valid)
        if cond == 'false':
            continue
        if cond != 'true':
            o(f'if ({cond}) {{')
            o.indent()
        size_expr(ctx, f, f.type, 'this->' + f.member(), ctx.flex_expr(f), ctx.nullable_expr(f),
                  is_optional(f), 'n', o)
        if cond != 'true':
            o.dedent()
            o('}')
    if ctx.msg.flexible.cond(ctx.valid) != 'false':
        tagged = sorted([f for f in fields
                         if f.tag is not None and f.tagged_range().cond(ctx.valid) != 'false'],
                        key=lambda f: f.tag)
        o('if (flex) {')
        o.indent()
        if not tagged:
            o('n += 1;')
        else:
            o('std::uint32_t tags = 0;')
            for f in tagged:
                o(f'if ({tagged_present(ctx, f)}) {{')
                o.indent()
                o('++tags;')
                o('std::size_t size = 0;')
                size_expr(ctx, f, f.type, 'this->' + f.member(), 'true', ctx.nullable_expr(f),
                          is_optional(f), 'size', o)
                o(f'n += uvarint_size({f.tag}) + uvarint_size(size) + size;')
                o.dedent()
                o('}')
            o('n += uvarint_size(tags);')
        o.dedent()
        o('}')
    o('return n;')


# ---- declarations ----


def emit_members(o, fields):
    for f in fields:
        d = default_expr(f)
        versions = f'v{f.versions}'
        notes = [versions]
        if not f.nullable.empty():
            notes.append(f'null {f.nullable.intersect(f.versions)}')
        if f.tag is not None:
            notes.append(f'tag {f.tag} in {f.tagged_range()}')
        comment = '  // ' + ', '.join(notes)
        init = f' = {d}' if d is not None else (' = {}' if f.type.kind == 'fixed' else '')
        o(f'{cpp_type(f)} {f.member()}{init};{comment}')


def emit_struct_decl(o, s, is_top, msg):
    o(f'struct {s.name} {{')
    o.indent()
    if is_top:
        if msg.kind != 'header':
            o(f'static constexpr std::int16_t kApiKey = {msg.api_key};')
        o(f'static constexpr std::int16_t kMinVersion = {msg.versions.lo};')
        o(f'static constexpr std::int16_t kMaxVersion = {msg.versions.hi};')
        o(f'// -1: no flexible version.')
        o(f'static constexpr std::int16_t kFirstFlexibleVersion = {msg.first_flexible()};')
        o(f'static constexpr bool kIsRequest = {"true" if msg.kind == "request" else "false"};')
        o(f'static constexpr std::string_view kName = "{msg.name}";')
        o()
        order, _ = struct_order(msg)
        for sub in order:
            o(f'using {sub.name} = {msg.file_stem()}::{sub.name};')
        if order:
            o()
    emit_members(o, s.fields)
    if s.fields:
        o()
    if is_top:
        o('// Reads the message as `version` encodes it. False (and r.error() set) on malformed input or')
        o('// a version outside [kMinVersion, kMaxVersion]; the object is then partly filled.')
        o('bool decode(Reader& r, std::int16_t version);')
    else:
        o('void decode(Reader& r, std::int16_t version);')
    o('void encode(Writer& w, std::int16_t version) const;')
    o('std::size_t encoded_size(std::int16_t version) const;')
    o(f'bool operator==(const {s.name}&) const = default;')
    o.dedent()
    o('};')


def emit_struct_defs(o, s, qual, is_top, msg):
    ctx = Ctx(msg)
    if is_top:
        o(f'bool {qual}::decode(Reader& r, std::int16_t version) {{')
        o.indent()
        o('if (version < kMinVersion || version > kMaxVersion) {')
        o.indent()
        o('r.fail(DecodeError::unsupported_version);')
        o('return false;')
        o.dedent()
        o('}')
        o(f'*this = {s.name}{{}};')
    else:
        o(f'void {qual}::decode(Reader& r, [[maybe_unused]] std::int16_t version) {{')
        o.indent()
    emit_decode_body(o, ctx, s.fields)
    if is_top:
        o('return r.ok();')
    o.dedent()
    o('}')
    o()
    o(f'void {qual}::encode(Writer& w, [[maybe_unused]] std::int16_t version) const {{')
    o.indent()
    emit_encode_body(o, ctx, s.fields)
    o.dedent()
    o('}')
    o()
    o(f'std::size_t {qual}::encoded_size([[maybe_unused]] std::int16_t version) const {{')
    o.indent()
    emit_size_body(o, ctx, s.fields)
    o.dedent()
    o('}')
    o()


GENERATED_NOTE = '// Generated by net/kafka/codegen/gen.py from {src}. Do not edit.'


def gen_message(msg, rel):
    h = Out()
    h(GENERATED_NOTE.format(src=rel))
    for c in msg.comments:
        h(f'// {c}' if c else '//')
    h('#pragma once')
    h()
    h('#include <cstddef>')
    h('#include <cstdint>')
    h('#include <limits>')
    h('#include <optional>')
    h('#include <string>')
    h('#include <string_view>')
    h('#include <vector>')
    h()
    h('#include "net/kafka/wire.h"')
    h()
    h('namespace samsa::kafka {')
    h()
    top_order, top = struct_order(msg)
    if top_order:
        # clang 14 evaluates is_default_constructible of a nested class before its member
        # initializers are parsed (while the enclosing class is incomplete) and caches
        # `false`, which breaks std::optional<Nested>::emplace(): so the structs a message
        # nests live in a namespace of their own and the message names them with aliases.
        h(f'// The structs {msg.name} nests ({msg.name}::X names them too).')
        h(f'namespace {msg.file_stem()} {{')
        h()
        for sub in top_order:
            emit_struct_decl(h, sub, False, msg)
            h()
        h(f'}}  // namespace {msg.file_stem()}')
        h()
    emit_struct_decl(h, top, True, msg)
    h()
    h('}  // namespace samsa::kafka')

    c = Out()
    c(GENERATED_NOTE.format(src=rel))
    c(f'#include "net/kafka/gen/{msg.file_stem()}.h"')
    c()
    c('#include "base/bytes.h"')
    c()
    c('namespace samsa::kafka {')
    c()
    for s in top_order:
        emit_struct_defs(c, s, f'{msg.file_stem()}::{s.name}', False, msg)
    emit_struct_defs(c, top, msg.name, True, msg)
    c('}  // namespace samsa::kafka')
    return h.text(), c.text()


# ---- api table ----


def gen_api_table(msgs):
    reqs = {m.api_key: m for m in msgs if m.kind == 'request'}
    resps = {m.api_key: m for m in msgs if m.kind == 'response'}
    for k in sorted(set(reqs) | set(resps)):
        if k not in reqs or k not in resps:
            which = reqs.get(k) or resps.get(k)
            raise SchemaError(f'{which.path}: api key {k} needs both a request and a response')
        a, b = reqs[k], resps[k]
        if str(a.versions) != str(b.versions) or str(a.flexible) != str(b.flexible):
            raise SchemaError(f'{b.path}: versions differ from {a.path}')
        if not a.name.endswith('Request') or b.name != a.name[:-len('Request')] + 'Response':
            raise SchemaError(f'{b.path}: expected the pair FooRequest/FooResponse')
    o = Out()
    o(GENERATED_NOTE.format(src='net/kafka/schema/*.ks'))
    o('// The APIs that have generated codecs, and a switch from api key to their types.')
    o('#pragma once')
    o()
    o('#include <cstdint>')
    o('#include <string_view>')
    o('#include <type_traits>')
    o()
    o('#include "net/kafka/gen/messages.h"')
    o()
    o('namespace samsa::kafka {')
    o()
    o('struct GeneratedApi {')
    o('  std::int16_t key;')
    o('  std::string_view name;')
    o('  std::int16_t min_version;')
    o('  std::int16_t max_version;')
    o('  std::int16_t first_flexible_version;  // -1: none')
    o('};')
    o()
    o('inline constexpr GeneratedApi kGeneratedApis[] = {')
    for k in sorted(reqs):
        m = reqs[k]
        o(f'    {{{k}, "{m.name[:-len("Request")]}", {m.versions.lo}, {m.versions.hi}, '
          f'{m.first_flexible()}}},')
    o('};')
    o()
    o('// Calls f(std::type_identity<Request>{}, std::type_identity<Response>{}) for api key `key`;')
    o('// false if no codec exists for it.')
    o('template <class F>')
    o('bool visit_api(std::int16_t key, F&& f) {')
    o('  switch (key) {')
    for k in sorted(reqs):
        o(f'    case {k}:')
        o(f'      f(std::type_identity<{reqs[k].name}>{{}}, std::type_identity<{resps[k].name}>{{}});')
        o('      return true;')
    o('    default:')
    o('      return false;')
    o('  }')
    o('}')
    o()
    o('// Calls f(std::type_identity<Request>{}, std::type_identity<Response>{}) for every api.')
    o('template <class F>')
    o('void for_each_api(F&& f) {')
    for k in sorted(reqs):
        o(f'  f(std::type_identity<{reqs[k].name}>{{}}, std::type_identity<{resps[k].name}>{{}});')
    o('}')
    o()
    o('}  // namespace samsa::kafka')
    return o.text()


def gen_messages_h(msgs):
    o = Out()
    o(GENERATED_NOTE.format(src='net/kafka/schema/*.ks'))
    o('#pragma once')
    o()
    for m in sorted(msgs, key=lambda m: m.file_stem()):
        o(f'#include "net/kafka/gen/{m.file_stem()}.h"')
    return o.text()


# ---- test support: fill every field present in a version with a non-default value ----


def gen_testing(msgs):
    o = Out()
    o(GENERATED_NOTE.format(src='net/kafka/schema/*.ks'))
    o('// Test support: fill(message, version, filler) sets every field present in `version` to a')
    o('// value other than its default (or, in nulls mode, to null where the version allows it),')
    o('// so that round trips exercise every field of every version.')
    o('#pragma once')
    o()
    o('#include <array>')
    o('#include <cstddef>')
    o('#include <cstdint>')
    o('#include <span>')
    o('#include <string>')
    o('#include <type_traits>')
    o('#include <vector>')
    o()
    o('#include "net/kafka/gen/messages.h"')
    o()
    o('namespace samsa::kafka::testing {')
    o()
    o('class Filler {')
    o(' public:')
    o('  // nulls: nullable fields become null where the version allows it.')
    o('  explicit Filler(std::uint32_t seed, bool nulls = false) : next_(seed), nulls_(nulls) {')
    o('    for (std::size_t i = 0; i < pool_.size(); ++i)')
    o('      pool_[i] = std::byte(static_cast<std::uint8_t>(i * 37 + seed));')
    o('  }')
    o('  bool nulls() const { return nulls_; }')
    o('  // A value different from `avoid`, spread over the type\'s whole range.')
    o('  template <class T>')
    o('  T value(T avoid) {')
    o('    if constexpr (std::is_same_v<T, bool>) {')
    o('      return !avoid;')
    o('    } else if constexpr (std::is_floating_point_v<T>) {')
    o('      T v = static_cast<T>(step()) / 8.0 + 0.5;')
    o('      return v == avoid ? v + 1 : v;')
    o('    } else {')
    o('      // Alternate small, negative and wide values so varints and sign handling both run.')
    o('      std::uint64_t s = step();')
    o('      std::uint64_t raw = (s % 3 == 0)   ? s')
    o('                          : (s % 3 == 1) ? ~s')
    o('                                         : s * 0x9e3779b97f4a7c15ull;')
    o('      T v = static_cast<T>(raw);')
    o('      return v == avoid ? static_cast<T>(v + 1) : v;')
    o('    }')
    o('  }')
    o('  std::string string() { return "s" + std::to_string(step()); }')
    o('  std::string string(std::string_view avoid) {')
    o('    std::string s = string();')
    o('    return s == avoid ? s + "x" : s;')
    o('  }')
    o('  Uuid uuid() {')
    o('    Uuid u{};')
    o('    std::uint64_t s = step();')
    o('    for (std::size_t i = 0; i < u.size(); ++i) u[i] = static_cast<std::uint8_t>(s * 31 + i + 1);')
    o('    return u;')
    o('  }')
    o('  Bytes bytes() {')
    o('    Bytes b(1 + step() % 9);')
    o('    for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::byte(static_cast<std::uint8_t>(i + 7));')
    o('    return b;')
    o('  }')
    o('  // Records point into the filler\'s own pool (decoding points into the frame).')
    o('  Records records() {')
    o('    std::size_t len = 5 + step() % 40;')
    o('    std::size_t off = step() % (pool_.size() - len);')
    o('    return Records(std::span<std::byte>(pool_).subspan(off, len));')
    o('  }')
    o('  std::size_t count() { return 1 + step() % 2; }')
    o()
    o(' private:')
    o('  std::uint64_t step() { return ++next_; }')
    o('  std::uint64_t next_;')
    o('  bool nulls_;')
    o('  std::array<std::byte, 256> pool_{};')
    o('};')
    o()

    def value_expr(f, t, ctx_default):
        if t.kind == 'fixed':
            if t.name == 'uuid':
                return 'f.uuid()'
            ct = FIXED[t.name][0]
            d = ctx_default if ctx_default is not None else ('false' if t.name == 'bool' else '0')
            return f'f.value<{ct}>({d})'
        if t.kind == 'string':
            if ctx_default is not None and ctx_default not in ('""', 'null'):
                return f'f.string({ctx_default})'
            return 'f.string()'
        if t.kind == 'bytes':
            return 'f.bytes()'
        if t.kind == 'records':
            return 'f.records()'
        raise AssertionError(t.kind)

    def emit_fill_field(f, valid):
        cond = f.versions.cond(valid)
        if cond == 'false':
            return
        o(f'if ({cond}) {{')
        o.indent()
        x = 'm.' + f.member()
        t = f.type
        null_cond = f.nullable.intersect(f.versions).cond(valid)
        if null_cond != 'false':
            o(f'if (f.nulls() && ({null_cond})) {{')
            o.indent()
            if t.kind == 'records':
                o(f'{x}.set_null();')
            else:
                o(f'{x}.reset();')
            o.dedent()
            o('} else {')
            o.indent()
        dflt = f.default
        if t.kind == 'fixed' and t.name in INT_RANGES and dflt is not None:
            dflt = int_literal(t.name, int(dflt, 0))
        if t.kind == 'array':
            e = t.elem
            target = f'{x}.emplace()' if is_optional(f) else x
            o(f'auto& items = {target};')
            o('items.clear();')
            o('for (std::size_t i = 0, n = f.count(); i < n; ++i) {')
            o.indent()
            if e.kind == 'struct':
                o('fill(items.emplace_back(), version, f);')
            else:
                o(f'items.push_back({value_expr(f, e, None)});')
            o.dedent()
            o('}')
        elif t.kind == 'struct':
            target = f'{x}.emplace()' if is_optional(f) else x
            o(f'fill({target}, version, f);')
        else:
            o(f'{x} = {value_expr(f, t, dflt)};')
        if null_cond != 'false':
            o.dedent()
            o('}')
        o.dedent()
        o('}')

    for m in sorted(msgs, key=lambda m: m.name):
        order, _ = struct_order(m)
        for s in order:
            o(f'inline void fill({m.name}::{s.name}& m, std::int16_t version, Filler& f);')
        o(f'inline void fill({m.name}& m, std::int16_t version, Filler& f);')
    o()
    for m in sorted(msgs, key=lambda m: m.name):
        order, top = struct_order(m)
        for s, qual in [(s, f'{m.name}::{s.name}') for s in order] + [(top, m.name)]:
            o(f'inline void fill({qual}& m, [[maybe_unused]] std::int16_t version, '
              f'[[maybe_unused]] Filler& f) {{')
            o.indent()
            for f in s.fields:
                emit_fill_field(f, m.versions)
            o.dedent()
            o('}')
            o()
    o('// Calls f(std::type_identity<M>{}) for every generated message, headers included.')
    o('template <class F>')
    o('void for_each_message(F&& f) {')
    for m in sorted(msgs, key=lambda m: m.name):
        o(f'  f(std::type_identity<{m.name}>{{}});')
    o('}')
    o()
    o('}  // namespace samsa::kafka::testing')
    return o.text()


# --------------------------------------------------------------------------------------------


def outputs(msgs):
    files = []
    for m in msgs:
        files += [f'{m.file_stem()}.h', f'{m.file_stem()}.cc']
    files += ['messages.h', 'api_table.h', 'testing.h']
    return files


def write_if_changed(path, text):
    try:
        with open(path, encoding='utf-8') as f:
            if f.read() == text:
                # Still touch it: the build compares timestamps with the schema files.
                os.utime(path)
                return
    except FileNotFoundError:
        pass
    tmp = path + '.tmp'
    with open(tmp, 'w', encoding='utf-8') as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', help='output directory')
    ap.add_argument('--list', action='store_true', help='print output file names and exit')
    ap.add_argument('schemas', nargs='+')
    args = ap.parse_args()
    try:
        msgs = [parse_file(p) for p in sorted(args.schemas)]
        names = {}
        for m in msgs:
            if m.name in names:
                raise SchemaError(f'{m.path}: message {m.name} also in {names[m.name]}')
            names[m.name] = m.path
            stem = os.path.splitext(os.path.basename(m.path))[0]
            if stem != m.name:
                raise SchemaError(f'{m.path}: file name must be {m.name}.ks')
        if args.list:
            print(';'.join(outputs(msgs)))
            return 0
        if not args.out:
            ap.error('--out is required')
        os.makedirs(args.out, exist_ok=True)
        for m in msgs:
            rel = 'net/kafka/schema/' + os.path.basename(m.path)
            h, c = gen_message(m, rel)
            write_if_changed(os.path.join(args.out, f'{m.file_stem()}.h'), h)
            write_if_changed(os.path.join(args.out, f'{m.file_stem()}.cc'), c)
        write_if_changed(os.path.join(args.out, 'messages.h'), gen_messages_h(msgs))
        write_if_changed(os.path.join(args.out, 'api_table.h'),
                         gen_api_table([m for m in msgs if m.kind != 'header']))
        write_if_changed(os.path.join(args.out, 'testing.h'), gen_testing(msgs))
    except SchemaError as e:
        print(f'gen.py: error: {e}', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
