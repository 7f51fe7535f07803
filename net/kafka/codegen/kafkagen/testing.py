"""testing.h: fill(message, version, filler) for the tests' round trips."""

from .cxx import GENERATED_NOTE, Out, int_literal, is_optional, struct_order
from .model import FIXED, INT_RANGES


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
        o.open(f'if ({cond}) {{')
        x = 'm.' + f.member()
        t = f.type
        null_cond = f.nullable.intersect(f.versions).cond(valid)
        if null_cond != 'false':
            o.open(f'if (f.nulls() && ({null_cond})) {{')
            if t.kind == 'records':
                o(f'{x}.set_null();')
            else:
                o(f'{x}.reset();')
            o.reopen()
        dflt = f.default
        if t.kind == 'fixed' and t.name in INT_RANGES and dflt is not None:
            dflt = int_literal(t.name, int(dflt, 0))
        if t.kind == 'array':
            e = t.elem
            target = f'{x}.emplace()' if is_optional(f) else x
            o(f'auto& items = {target};')
            o('items.clear();')
            o.open('for (std::size_t i = 0, n = f.count(); i < n; ++i) {')
            if e.kind == 'struct':
                o('fill(items.emplace_back(), version, f);')
            else:
                o(f'items.push_back({value_expr(f, e, None)});')
            o.close()
        elif t.kind == 'struct':
            target = f'{x}.emplace()' if is_optional(f) else x
            o(f'fill({target}, version, f);')
        else:
            o(f'{x} = {value_expr(f, t, dflt)};')
        if null_cond != 'false':
            o.close()
        o.close()

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
            o.close()
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
