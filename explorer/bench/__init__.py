"""The Decode benchmark page: result rows and readouts, the fp8 quantization error, the runs recorded on a GPU (classic, peers) and their figures."""
