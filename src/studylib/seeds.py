"""The seed articles the studies re-examine, named as a reader cites them: title, author, year, address.

Read from the headers and bylines of the stored copies (shared/seeds/*.txt, mostly Chinese translations); an
address is given only where the copy carries one, and a field the copy does not state says so.
"""

from __future__ import annotations

import html
from dataclasses import dataclass


@dataclass(frozen=True)
class Seed:
    id: str
    title: str
    author: str
    year: str
    url: str = ""  # "" where the stored copy gives no address
    read_as: str = ""  # the stored copy, where it is a translation or a report of the original

    def html(self) -> str:
        title = html.escape(self.title)
        title = f'<a href="{html.escape(self.url)}">{title}</a>' if self.url else title
        via = f" Read as: {html.escape(self.read_as)}." if self.read_as else ""
        return f"<li><b>Seed {self.id}</b>: {title}, {html.escape(self.author)}, {html.escape(self.year)}.{via}</li>"


SEEDS = {s.id: s for s in (
    Seed("000", "Benchmarking Transformers: PyTorch and TensorFlow", "Lysandre Debut (Hugging Face)", "2019",
         "https://medium.com/huggingface/benchmarking-transformers-pytorch-and-tensorflow-e2917fb891c2",
         "PyTorch & TensorFlow 跑分对决：哪个平台运行NLP模型推理更快 (51CTO 技术栈, a report of the post)"),
    Seed("001", "Why is PyTorch as fast as (and sometimes faster than) TensorFlow? (a Reddit thread)",
         "Reddit users; report by 新智元 (AI_era)", "year not given in the copy",
         read_as="Reddit熱議：為什么PyTorch比TensorFlow更快? (新智元)"),
    Seed("002", "Keras 3 benchmarks: three backends against native PyTorch and Keras 2", "the Keras team", "2024",
         read_as="谷歌力推的JAX在最近的基准测试中性能已经超过Pytorch和TensorFlow (a Chinese report)"),
    Seed("003", "PyTorch, TorchScript and ONNX across batch sizes, on camemBERT (~100M parameters); the copy gives "
                "no title",
         "Maxence Alluin", "year not given in the copy", "https://yundeesoft.com/164741.html",
         "the deephub translation group's Chinese translation"),
    Seed("004", "How does PyTorch 2.0 perform in inference? A benchmark with TensorRT and ONNX Runtime", "Nebuly",
         "2023", "https://medium.com/mlearning-ai/how-does-pytorch-2-0-perform-in-inference-a-benchmark-with-tensorrt"
                 "-and-onnx-runtime-fa1e59237f93", "a Chinese translation"),
)}


def html_list(ids=None) -> str:
    """The seeds (all, or `ids`) as an HTML list, each by title, author and year, linked where it has an address."""
    return "<ul class=\"study-seeds\">" + "".join(SEEDS[i].html() for i in (ids or SEEDS)) + "</ul>"
