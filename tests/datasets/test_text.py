"""Text clean-up helpers of the converters."""

from __future__ import annotations

from thoughtsource.datasets._text import detokenize, sentence, split_sentences, upper_first


def test_detokenize_undoes_treebank_tokens() -> None:
    assert detokenize("Wilhelm Conrad Röntgen , of Germany , who received 150,782 SEK .") == (
        "Wilhelm Conrad Röntgen, of Germany, who received 150,782 SEK.")
    assert detokenize("Newton ( N ) is an SI unit") == "Newton (N) is an SI unit"
    assert detokenize("the earth 's axis do n't") == "the earth's axis don't"
    assert detokenize("Maria Skłodowska - Curie") == "Maria Skłodowska-Curie"
    assert detokenize("`` quoted '' text") == '"quoted" text'


def test_upper_first_keeps_the_rest() -> None:
    assert upper_first("fort Wayne is in Indiana") == "Fort Wayne is in Indiana"
    assert upper_first("p53 alteration") == "p53 alteration"  # a symbol with its own casing
    assert upper_first("mRNA levels") == "mRNA levels"
    assert sentence("  the sun rises  ") == "The sun rises."
    assert sentence("disorders;") == "Disorders."
    assert sentence("Is it?") == "Is it?"


def test_split_sentences() -> None:
    text = "Anxiety is a feeling.\nApplying for a job has an uncertain outcome"
    assert split_sentences(text) == ["Anxiety is a feeling.", "Applying for a job has an uncertain outcome"]
    assert split_sentences("Fort Wayne is in Indiana. Dr. Smith lives there. It is big.") == [
        "Fort Wayne is in Indiana.", "Dr. Smith lives there.", "It is big."]
    assert split_sentences("Contraction of the m. puborectalis is weak. It matters.", join_lowercase=True) == [
        "Contraction of the m. puborectalis is weak.", "It matters."]
