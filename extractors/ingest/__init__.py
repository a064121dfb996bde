"""Input routing: walking files, decoding records, and routing each record to the reader that sniffs it.

Nothing here knows a scenario; readers and harness reports are found by their tags or their shape.
"""
