"""The .h of one message: the struct declarations with their members, defaults and constants."""

from .cxx import GENERATED_NOTE, Out, cpp_type, default_expr, struct_order


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
    o.open(f'struct {s.name} {{')
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
    o.close('};')


def gen_header(msg, rel):
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
    return h.text()
