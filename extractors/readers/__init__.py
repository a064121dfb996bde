"""One module per raw trajectory format, each a class tagged with `@reader`.

Support modules (records, reports, labels, _text) hold the shared decoding, harness-report
parsing and labelling rules; they carry no tag and are not readers.
"""
