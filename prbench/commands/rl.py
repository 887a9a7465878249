"""Train a policy online with TRL (GRPO or RLOO) using a prbench scorer as the reward.

The policy answers the benchmark's questions with the user's profile view in the prompt; each group
of sampled answers is scored in one batched call of the scorer runtime. The policy is evaluated
greedily before and after training with the reward and a judge (any pointwise scorer). The
default judge, oracle-rubric, works offline and is DIAGNOSTIC (it reads the
hidden rubric); pass --judge_args judge=rubric-judge,backend=hf,model=PATH for a real judge. Needs
the 'rl' extra (trl).

Example: prbench rl --policy_args model=PATH --model_args scorer=length -o rl_out --max_steps 2
--limit 4
"""

from __future__ import annotations

import argparse
import sys

#: where the command writes, checked before any work (:func:`prbench.cli.check_outputs`)
OUTPUTS = {"output_path": "dir"}

#: the options of ``--policy_args``: the same keys as ``prbench bon``'s policy where they apply
#: (the policy is trained in this process, so ``backend`` is ``hf`` only; sampling is set by
#: ``--temperature``, ``--top_p`` and ``--seed``)
POLICY_OPTIONS = ("backend", "model", "gguf_file")
#: ``prbench bon``'s sampling keys, which ``prbench rl`` takes as flags
SAMPLING_FLAGS = {"temperature": "--temperature", "top_p": "--top_p", "seed": "--seed",
                  "max_new_tokens": "--max_completion_length"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``prbench rl``."""
    from prbench.commands import add_component_argument, add_scorer_argument
    from prbench.downstream.rl_config import ALGORITHMS, RLConfig

    d = RLConfig(policy="", output_dir="", scorer="")
    add_component_argument(parser, "policy", default="", required=True,
                           help="the policy to train, as in `prbench bon`: model= a causal LM "
                           "folder or hub id, gguf_file= a GGUF file inside it, backend=hf (the "
                           "only backend that can be trained), e.g. model=PATH,gguf_file=F.gguf")
    parser.add_argument("--trust_remote_code", action="store_true",
                        help="run code shipped with the policy (an auto_map in its config); only "
                        "for code you have read and trust")
    add_scorer_argument(parser)  # the reward
    parser.add_argument("-o", "--output_path", required=True,
                        help="checkpoints, final policy (final/) and rl_results.json")
    parser.add_argument("--data", default="sample",
                        help="training records: a file, a folder, 'sample' or a hub id")
    parser.add_argument("--eval_data", default="",
                        help="evaluation records (default: the training records)")
    parser.add_argument("--limit", type=int, default=0,
                        help="use only the first N records (0: all)")
    parser.add_argument("--eval_limit", type=int, default=0,
                        help="evaluate on only the first N evaluation records (0: all)")
    add_component_argument(parser, "profile", default="none",
                           help="profile builder for the policy prompt and the reward, and its "
                           "options, e.g. builder=dense,k=10,model=minilm")
    parser.add_argument("--algorithm", choices=ALGORITHMS, default=d.algorithm,
                        help="TRL trainer")
    parser.add_argument("--num_generations", type=int, default=d.num_generations,
                        help="completions per prompt")
    parser.add_argument("--prompts_per_step", type=int, default=d.prompts_per_step,
                        help="prompts per optimisation step")
    parser.add_argument("--max_steps", type=int, default=d.max_steps,
                        help="optimisation steps (-1: --epochs over the data)")
    parser.add_argument("--epochs", type=float, default=d.epochs,
                        help="passes over the data (with --max_steps -1)")
    parser.add_argument("--learning_rate", type=float, default=d.learning_rate,
                        help="optimiser learning rate")
    parser.add_argument("--beta", type=float, default=d.beta, help="KL coefficient (0: none)")
    parser.add_argument("--max_completion_length", type=int, default=d.max_completion_length,
                        help="tokens per sampled completion")
    parser.add_argument("--temperature", type=float, default=d.temperature,
                        help="sampling temperature of the completions")
    parser.add_argument("--top_p", type=float, default=d.top_p,
                        help="nucleus sampling of the completions")
    parser.add_argument("--seed", type=int, default=d.seed, help="training seed")
    parser.add_argument("--save_steps", type=int, default=d.save_steps,
                        help="checkpoint every N steps")
    add_component_argument(parser, "judge", default=d.judge,
                           help="judge (any pointwise scorer) for the before/after evaluation; "
                           "the default oracle-rubric works offline but is DIAGNOSTIC (it reads "
                           "the hidden rubric); a real judge: "
                           "judge=rubric-judge,backend=hf,model=PATH; judge=none to skip")
    parser.add_argument("--eval_max_new_tokens", type=int, default=d.eval_max_new_tokens,
                        help="tokens per greedy evaluation answer")
    parser.add_argument("--train_layers", type=int, default=d.train_layers, metavar="N",
                        help="train only the top N transformer blocks (0: all); the backward pass "
                        "stops at the lowest trained block, so a small N makes a step cheaper")
    parser.add_argument("--gradient_checkpointing", action="store_true",
                        help="recompute activations in the backward pass: less memory for a large "
                        "policy on a GPU, about a third more compute (off by default)")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the newest checkpoint in --output_path")


def run(args: argparse.Namespace) -> int:
    """Evaluate, train, evaluate; print a before/after table."""
    from prbench.commands import check_scorer, component_args, scorer_specs
    from prbench.downstream.evaluator import parse_scorer_spec
    from prbench.plugins import get_registry
    from prbench.progress import progress_enabled
    from prbench.records import load_records

    try:
        import trl  # noqa: F401
    except ImportError:
        print("error: prbench rl needs the 'rl' extra: pip install -c constraints-cpu.txt "
              "-e '.[rl]'", file=sys.stderr)
        return 1
    from prbench.downstream.rl import format_summary

    policy = policy_options(args)
    scorer, scorer_options = parse_scorer_spec(scorer_specs(args)[0])
    judge, judge_options = component_args(args, "judge")
    if judge in ("", "none"):
        judge, judge_options = "", {}
    profile, profile_options = component_args(args, "profile")
    registry = get_registry(args.plugin)
    for kind, name, raw in (("reward", scorer, scorer_options), ("judge", judge, judge_options)):
        if name:  # unknown ids and bad options end here, before any model is loaded
            check_scorer(registry, name, raw, what=kind)
    if judge and registry.get("scorer", judge).diagnostic:
        print(f"note: judge {judge!r} is DIAGNOSTIC (it reads the hidden rubric); for a real "
              "judge pass --judge_args judge=rubric-judge,backend=hf,model=PATH", file=sys.stderr)
    options = {
        "policy": policy["model"], "output_dir": args.output_path, "scorer": scorer,
        "scorer_options": scorer_options, "gguf_file": policy.get("gguf_file", ""),
        "algorithm": args.algorithm, "num_generations": args.num_generations,
        "prompts_per_step": args.prompts_per_step, "max_steps": args.max_steps,
        "epochs": args.epochs, "learning_rate": args.learning_rate, "beta": args.beta,
        "max_completion_length": args.max_completion_length, "temperature": args.temperature,
        "top_p": args.top_p, "seed": args.seed, "save_steps": args.save_steps, "judge": judge,
        "judge_options": judge_options, "eval_max_new_tokens": args.eval_max_new_tokens,
        "progress": progress_enabled(), "trust_remote_code": args.trust_remote_code,
        "gradient_checkpointing": args.gradient_checkpointing, "train_layers": args.train_layers,
    }
    evaluator = registry.build("downstream-evaluator", "online-rl", options)
    train = load_records(args.data)
    evals = load_records(args.eval_data) if args.eval_data else train
    if args.limit > 0:
        train = train[: args.limit]
        if not args.eval_data:
            evals = train
    if args.eval_limit > 0:
        evals = evals[: args.eval_limit]
    results = evaluator.run(train, evals, profile=profile, profile_options=profile_options,
                            resume=args.resume)
    print(format_summary(results))
    print(f"results: {args.output_path}/rl_results.json; policy: {results['final_policy']}")
    return 0


def policy_options(args: argparse.Namespace) -> dict[str, str]:
    """The policy of ``--policy_args model=PATH[,gguf_file=F]``.

    Raises:
        OptionsError: an option other than :data:`POLICY_OPTIONS`, or no ``model``.
    """
    from prbench.commands import component_args
    from prbench.options import OptionsError, suggest

    _, options = component_args(args, "policy")
    backend = str(options.pop("backend", "hf")).strip()
    if backend != "hf":
        raise OptionsError(
            f"--policy_args backend={backend}: prbench rl trains the policy's weights in this "
            "process, so the policy is a local or hub model (backend=hf, the default); a served "
            "model (backend=openai) can only be sampled, as in `prbench bon`"
        )
    for name in options:
        if name in SAMPLING_FLAGS:
            raise OptionsError(
                f"--policy_args {name}=...: prbench rl sets sampling with flags: write "
                f"{SAMPLING_FLAGS[name]} {options[name]} (in `prbench bon` it is part of "
                "--policy_args)"
            )
        if name not in POLICY_OPTIONS:
            raise OptionsError(
                f"--policy_args: unknown option {name!r}{suggest(name, POLICY_OPTIONS)}; the "
                f"policy takes {', '.join(POLICY_OPTIONS)} (sampling is set by --temperature, "
                "--top_p and --seed)"
            )
    model = str(options.get("model", "")).strip()
    if not model:
        raise OptionsError("--policy_args names no model: write --policy_args model=PATH (a "
                           "causal LM folder or hub id)[,gguf_file=F.gguf]")
    return {**{name: str(value) for name, value in options.items()}, "model": model}
