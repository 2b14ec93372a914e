"""The Serving simulation page: the block manager, the traffic simulator, what a step leaves behind, its history, the block-size trade-off and their figures."""
