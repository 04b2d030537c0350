"""The report: archived executed notebooks and the static site built from them and the committed CSVs."""
