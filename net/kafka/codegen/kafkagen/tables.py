"""The files about all messages: messages.h (includes them all) and api_table.h (the APIs with
codecs, and the switch from api key to their types)."""

from .cxx import GENERATED_NOTE, Out
from .model import SchemaError


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
