"""One module per raw trajectory format, each a class tagged with `@reader`.

Readers only: `_chat` and `_text` are their shared decoding helpers; `envsetup/` holds the readers of
run-folder formats. Input routing lives in `extractors/ingest/`, success labels in `extractors/labels/`.
"""
