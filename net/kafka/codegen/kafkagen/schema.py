"""The reader of net/kafka/schema/*.ks: parse_file() turns one file into a resolved, checked
Message (the format is described in net/kafka/README.md)."""

import re

from .model import FIXED, INT16_MAX, INT_RANGES, Field, Message, Range, SchemaError, StructDef, Type


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
            base = f.type.base()
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
            base = f.type.base()
            if base.kind == 'struct':
                if base.name not in msg.structs:
                    raise SchemaError(f'{f.where}: unknown struct {base.name}')
                base.struct = msg.structs[base.name]

    for s in msg.structs.values():
        bind(s.fields)
    bind(msg.fields)
    if msg.versions.empty():
        raise SchemaError(f'{msg.path}: no valid version')
