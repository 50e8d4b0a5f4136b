"""lm-evaluation-harness task definitions over ``../shared/data`` (no hub): the tests and benchmarks that run lm-eval
against serve-model and its own ``hf`` model use them.  ``.format(data=FOLDER)`` fills in the data folder."""

#: CommonsenseQA as a multiple-choice task (log-likelihood of each answer: echo + logprobs through a server)
MC_TASK = """task: ts_commonsense_qa
dataset_path: json
dataset_kwargs:
  data_files:
    validation: {data}/commonsense_qa/dev_rand_split.jsonl
validation_split: validation
output_type: multiple_choice
doc_to_text: "Question: {{{{question.stem}}}}\\nAnswer:"
doc_to_choice: "{{{{question.choices | map(attribute='text') | list}}}}"
doc_to_target: "{{{{['A', 'B', 'C', 'D', 'E'].index(answerKey)}}}}"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
"""

#: GSM8K as a greedy generation task
GEN_TASK = """task: ts_gsm8k
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}/gsm8k/test.jsonl
test_split: test
output_type: generate_until
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{answer.split('#### ')[-1]}}}}"
generation_kwargs:
  until: ["\\n\\n", "Question:"]
  do_sample: false
  temperature: 0.0
  max_gen_toks: 24
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
"""
