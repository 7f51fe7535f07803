"""The .cc of one message: decode, encode and encoded_size of the message and every struct it
nests."""

from .cxx import GENERATED_NOTE, Ctx, Out, differs_from_default, elem_min, is_optional, struct_order
from .model import FIXED


# ---- decode ----


def emit_read_value(o, ctx, f, t, x, reader, compact, nullable, opt, version_var='version'):
    """Reads one value of type t into lvalue x."""
    if t.kind == 'fixed':
        if t.name == 'uuid':
            o(f'{reader}.uuid({x});')
        else:
            o(f'{x} = {reader}.{FIXED[t.name][2]}();')
    elif t.kind in ('string', 'bytes'):
        if opt:
            o(f'{reader}.nullable_{t.kind}({x}, {compact}, {nullable});')
        else:
            o(f'{reader}.{t.kind}({x}, {compact});')
    elif t.kind == 'records':
        o(f'{reader}.records({x}, {compact}, {nullable});')
    elif t.kind == 'array':
        e = t.elem
        minsize = elem_min(ctx.msg, f)
        o.open('{')
        o(f'const std::int32_t count = {reader}.array_length({compact}, {nullable}, {minsize});')
        if opt:
            o.open('if (count < 0) {')
            o(f'{x}.reset();')
            o.reopen()
            o(f'auto& items = {x}.emplace();')
        else:
            o(f'auto& items = {x};')
        o('items.clear();')
        o(f'if ({reader}.charge_items(items, count)) items.reserve(static_cast<std::size_t>(count < 0 ? 0 : count));')
        o.open(f'for (std::int32_t i = 0; i < count && {reader}.ok(); ++i) {{')
        if e.kind == 'fixed' and e.name != 'uuid':
            o(f'items.push_back({reader}.{FIXED[e.name][2]}());')
        elif e.kind == 'struct':
            o(f'items.emplace_back().decode({reader}, {version_var});')
        else:
            emit_read_value(o, ctx, f, e, 'items.emplace_back()', reader, compact, 'false', False)
        o.close()
        if opt:
            o.close()
        o.close()
    else:  # struct
        if opt:
            if nullable == 'false':
                o(f'{x}.emplace().decode({reader}, {version_var});')
            else:
                cond = '' if nullable == 'true' else f'!({nullable}) || '
                o.open(f'if ({cond}{reader}.i8() >= 0) {{')
                o(f'{x}.emplace().decode({reader}, {version_var});')
                o.reopen()
                o(f'{x}.reset();')
                o.close()
        else:
            o(f'{x}.decode({reader}, {version_var});')


def emit_regular_fields(o, ctx, fields, emit):
    """Calls emit(f) for each positional field, under the test of the versions that have it."""
    for f in fields:
        cond = f.regular().cond(ctx.valid)
        if cond == 'false':
            continue
        if cond != 'true':
            o.open(f'if ({cond}) {{')
        emit(f)
        if cond != 'true':
            o.close()


def tagged_fields(ctx, fields):
    """The fields tagged in some version of this message, by tag."""
    return sorted([f for f in fields
                   if f.tag is not None and f.tagged_range().cond(ctx.valid) != 'false'],
                  key=lambda f: f.tag)


def emit_decode_body(o, ctx, fields):
    o(f'[[maybe_unused]] const bool flex = {ctx.msg.flexible.cond(ctx.valid)};')
    emit_regular_fields(
        o, ctx, fields,
        lambda f: emit_read_value(o, ctx, f, f.type, 'this->' + f.member(), 'r', ctx.flex_expr(f),
                                  ctx.nullable_expr(f), is_optional(f)))
    if ctx.msg.flexible.cond(ctx.valid) == 'false':
        return
    tagged = tagged_fields(ctx, fields)
    o.open('if (flex) {')
    o('const std::uint32_t tags = r.uvarint32();')
    o.open('for (std::uint32_t t = 0; t < tags && r.ok(); ++t) {')
    o('const std::uint32_t tag = r.uvarint32();')
    o('Reader field = r.sub(r.uvarint32());')
    if tagged:
        o.open('switch (tag) {')
        for f in tagged:
            cond = f.tagged_range().cond(ctx.valid)
            o.open(f'case {f.tag}:')
            if cond != 'true':
                o(f'if (!({cond})) break;  // not this field in this version: skipped')
            emit_read_value(o, ctx, f, f.type, 'this->' + f.member(), 'field', 'true',
                            ctx.nullable_expr(f), is_optional(f))
            o('r.end_sub(field);')
            o('break;')
            o.dedent()
        o.open('default:')
        o('break;  // unknown tagged fields are skipped')
        o.dedent()
        o.close()
    else:
        o('(void)tag;  // no known tagged fields: all are skipped')
        o('(void)field;')
    o.close()
    o.close()


# ---- encode ----


def emit_write_value(o, ctx, f, t, x, compact, nullable, opt):
    if t.kind == 'fixed':
        o(f'w.{FIXED[t.name][2]}({x});')
    elif t.kind in ('string', 'bytes'):
        if opt:
            o(f'w.nullable_{t.kind}({x}, {compact}, {nullable});')
        else:
            o(f'w.{t.kind}({x}, {compact});')
    elif t.kind == 'records':
        o(f'w.records({x}, {compact}, {nullable});')
    elif t.kind == 'array':
        e = t.elem
        if opt:
            o.open(f'if (!{x}) {{')
            o(f'w.null_length({compact}, {nullable});')
            o.reopen()
            items = f'(*{x})'
        else:
            items = x
        o(f'w.array_length({items}.size(), {compact});')
        o.open(f'for (const auto& item : {items}) {{')
        if e.kind == 'struct':
            o('item.encode(w, version);')
        else:
            emit_write_value(o, ctx, f, e, 'item', compact, 'false', False)
        o.close()
        if opt:
            o.close()
    else:  # struct
        if opt:
            if nullable == 'false':
                o(f'({x} ? *{x} : {t.name}{{}}).encode(w, version);')
            else:
                body_null = f'w.i8(-1);' if nullable == 'true' else \
                    f'if ({nullable}) {{ w.i8(-1); }} else {{ {t.name}{{}}.encode(w, version); }}'
                o.open(f'if (!{x}) {{')
                o(body_null)
                o.reopen()
                if nullable != 'true':
                    o(f'if ({nullable}) w.i8(1);')
                else:
                    o('w.i8(1);')
                o(f'{x}->encode(w, version);')
                o.close()
        else:
            o(f'{x}.encode(w, version);')


def size_expr(ctx, f, t, x, compact, nullable, opt, acc, o):
    """Emits statements adding the encoded size of x to acc."""
    if t.kind == 'fixed':
        o(f'{acc} += {FIXED[t.name][1]};')
    elif t.kind in ('string', 'bytes'):
        if opt:
            o(f'{acc} += Writer::{t.kind}_size({x} ? {x}->size() : 0, {compact});')
        else:
            o(f'{acc} += Writer::{t.kind}_size({x}.size(), {compact});')
    elif t.kind == 'records':
        o(f'{acc} += Writer::bytes_size({x}.size(), {compact});')
    elif t.kind == 'array':
        e = t.elem
        if opt:
            o.open(f'if ({x}) {{')
            items = f'(*{x})'
        else:
            items = x
        o(f'{acc} += Writer::length_size({items}.size(), {compact});')
        if e.kind == 'fixed':
            o(f'{acc} += {items}.size() * {FIXED[e.name][1]};')
        elif e.kind == 'struct':
            o(f'for (const auto& item : {items}) {acc} += item.encoded_size(version);')
        else:
            o.open(f'for (const auto& item : {items}) {{')
            size_expr(ctx, f, e, 'item', compact, 'false', False, acc, o)
            o.close()
        if opt:
            o.reopen()
            o(f'{acc} += Writer::length_size(0, {compact});')
            o.close()
    else:
        if opt:
            if nullable != 'false':
                o(f'if ({nullable}) {acc} += 1;')
            if nullable == 'true':
                o(f'if ({x}) {acc} += {x}->encoded_size(version);')
            else:
                o.open(f'if ({x}) {{')
                o(f'{acc} += {x}->encoded_size(version);')
                o.reopen(f'}} else if (!({nullable})) {{')
                o(f'{acc} += {t.name}{{}}.encoded_size(version);')
                o.close()
        else:
            o(f'{acc} += {x}.encoded_size(version);')


def tagged_present(ctx, f):
    cond = f.tagged_range().cond(ctx.valid)
    diff = differs_from_default(f, 'this->' + f.member())
    return diff if cond == 'true' else f'({cond}) && {diff}'


def emit_tagged_size(o, ctx, f):
    """Declares `size`: the bytes tagged field f takes after its tag and length."""
    o('std::size_t size = 0;')
    size_expr(ctx, f, f.type, 'this->' + f.member(), 'true', ctx.nullable_expr(f),
              is_optional(f), 'size', o)


def emit_encode_body(o, ctx, fields):
    o(f'[[maybe_unused]] const bool flex = {ctx.msg.flexible.cond(ctx.valid)};')
    emit_regular_fields(
        o, ctx, fields,
        lambda f: emit_write_value(o, ctx, f, f.type, 'this->' + f.member(), ctx.flex_expr(f),
                                   ctx.nullable_expr(f), is_optional(f)))
    if ctx.msg.flexible.cond(ctx.valid) == 'false':
        return
    tagged = tagged_fields(ctx, fields)
    o.open('if (flex) {')
    if not tagged:
        o('w.uvarint(0);  // no tagged fields')
    else:
        o('std::uint32_t tags = 0;')
        for i, f in enumerate(tagged):
            o(f'const bool has{i} = {tagged_present(ctx, f)};')
            o(f'tags += has{i};')
        o('w.uvarint(tags);')
        for i, f in enumerate(tagged):
            o.open(f'if (has{i}) {{')
            o(f'w.uvarint({f.tag});')
            emit_tagged_size(o, ctx, f)
            o('w.uvarint(static_cast<std::uint32_t>(size));')
            emit_write_value(o, ctx, f, f.type, 'this->' + f.member(), 'true', ctx.nullable_expr(f),
                             is_optional(f))
            o.close()
    o.close()


def emit_size_body(o, ctx, fields):
    o(f'[[maybe_unused]] const bool flex = {ctx.msg.flexible.cond(ctx.valid)};')
    o('std::size_t n = 0;')
    emit_regular_fields(
        o, ctx, fields,
        lambda f: size_expr(ctx, f, f.type, 'this->' + f.member(), ctx.flex_expr(f),
                            ctx.nullable_expr(f), is_optional(f), 'n', o))
    if ctx.msg.flexible.cond(ctx.valid) != 'false':
        tagged = tagged_fields(ctx, fields)
        o.open('if (flex) {')
        if not tagged:
            o('n += 1;')
        else:
            o('std::uint32_t tags = 0;')
            for f in tagged:
                o.open(f'if ({tagged_present(ctx, f)}) {{')
                o('++tags;')
                emit_tagged_size(o, ctx, f)
                o(f'n += uvarint_size({f.tag}) + uvarint_size(size) + size;')
                o.close()
            o('n += uvarint_size(tags);')
        o.close()
    o('return n;')



def emit_struct_defs(o, s, qual, is_top, msg):
    ctx = Ctx(msg)
    if is_top:
        o.open(f'bool {qual}::decode(Reader& r, std::int16_t version) {{')
        o.open('if (version < kMinVersion || version > kMaxVersion) {')
        o('r.fail(DecodeError::unsupported_version);')
        o('return false;')
        o.close()
        o(f'*this = {s.name}{{}};')
    else:
        o.open(f'void {qual}::decode(Reader& r, [[maybe_unused]] std::int16_t version) {{')
    emit_decode_body(o, ctx, s.fields)
    if is_top:
        o('return r.ok();')
    o.close()
    o()
    o.open(f'void {qual}::encode(Writer& w, [[maybe_unused]] std::int16_t version) const {{')
    emit_encode_body(o, ctx, s.fields)
    o.close()
    o()
    o.open(f'std::size_t {qual}::encoded_size([[maybe_unused]] std::int16_t version) const {{')
    emit_size_body(o, ctx, s.fields)
    o.close()
    o()


def gen_source(msg, rel):
    top_order, top = struct_order(msg)
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
    return c.text()
