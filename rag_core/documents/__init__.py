"""Documents into indexed chunks: `loaders` turns a file into a title and text blocks, `chunker` packs
sentences into token-bounded overlapping chunks, `pipeline` embeds and stores them idempotently.
Submodules are imported on demand so that importing the package stays cheap."""
