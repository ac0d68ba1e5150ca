"""What several groups need, below all of them: the similarity and same-fact scales, the use ledger,
a memory row's derived columns, the user card, which store keeps a profile folder."""
