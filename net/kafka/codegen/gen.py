#!/usr/bin/env python3
"""Generates samsa's Kafka message codecs (C++) from net/kafka/schema/*.ks.

Usage:
  gen.py --out DIR SCHEMA.ks...     write the generated sources into DIR
  gen.py --list SCHEMA.ks...        print the file names it would write (for CMake)

Stdlib only: the build runs it with whatever python3 it finds. The schema format is
described in net/kafka/README.md; kafkagen/schema.py is its only reader. The work is done by
the kafkagen package next to this file; tests/clients/kproto.py imports this module for
parse_file and the model, so those names stay here.
"""

import argparse
import os
import sys

# The build runs this from the source tree, which need not be writable: no __pycache__ there.
if __name__ == '__main__':
    sys.dont_write_bytecode = True

from kafkagen.header import gen_header  # noqa: E402
from kafkagen.model import Field, Message, Range, SchemaError, StructDef, Type  # noqa: E402,F401
from kafkagen.schema import parse_file  # noqa: E402
from kafkagen.source import gen_source  # noqa: E402
from kafkagen.tables import gen_api_table, gen_messages_h  # noqa: E402
from kafkagen.testing import gen_testing  # noqa: E402


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
            write_if_changed(os.path.join(args.out, f'{m.file_stem()}.h'), gen_header(m, rel))
            write_if_changed(os.path.join(args.out, f'{m.file_stem()}.cc'), gen_source(m, rel))
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
