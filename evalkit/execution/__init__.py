"""How work is run: the async pool of backend calls (`pool`), worker processes (`workers`), Dask
(`scheduler`), papermill on warm kernels (`execute`, `kernels`, `kernelreset`)."""
