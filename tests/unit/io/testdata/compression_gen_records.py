# The records every compression test vector holds (imported by the compression_gen_*.py scripts):
# ~70 KiB once encoded, more than one xerial block (32 KiB) and one LZ4 block (64 KiB).


def records():
    for i in range(260):
        key = b"key-%05d" % i
        value = (b'{"id":%d,"user":"user-%03d","event":"page_view","path":"/catalog/item/%d",'
                 b'"referrer":"https://example.com/search?q=item+%d","ua":"Mozilla/5.0 (X11; '
                 b'Linux x86_64) samsa-test","session":"%08x","score":%d.%02d,"tags":["a","b",'
                 b'"c%d"],"note":"%s"}' % (i, i % 37, i * 7919 % 10007, i % 101, i * 2654435761
                                           % 2**32, i % 17, i % 100, i % 5, b"x" * (i % 23)))
        yield 1700000000000 + i, key, value
