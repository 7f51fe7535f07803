"""The schema model: version ranges, types, fields, structs and messages, and the tables of the
fixed-size wire types. Everything else in kafkagen reads these objects; only schema.py makes
them."""

import re

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
# Schema model


class Type:
    def __init__(self, kind, name=None, elem=None):
        self.kind = kind  # fixed | string | bytes | records | array | struct
        self.name = name  # fixed type name or struct name
        self.elem = elem  # array element Type
        self.struct = None  # StructDef, resolved after parsing

    def is_fixed(self):
        return self.kind == 'fixed'

    def base(self):
        """The element type of an array, the type itself otherwise."""
        return self.elem if self.kind == 'array' else self


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

