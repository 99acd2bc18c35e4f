"""The report: decision tables and Answers, figures, the seed articles, HTML, the cross-profile summary, compare."""
