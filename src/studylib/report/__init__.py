"""The report: Answers, advice, figures, the seed articles, HTML, the cross-profile summary, compare, the browser check."""
