"""The Block table page: the block table, the physical pool, one sequence's token walk, the sharing scenario and the click link between table and pool (logic and figures)."""
