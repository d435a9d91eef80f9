// llama_train: trains a small Llama with reprise, on bytes or a tokenizer's
// ids, on a built-in generated corpus (nn/data.h) or any text file, and
// prints its progress.
// The run itself (model, optimizer, generator, step) is nn::Trainer
// (nn/trainer.h), its checkpoints nn/train_state.h; the command line around
// it (flags, logging, metrics, evaluation, saving and HF import/export) is
// examples/common/train_cli.h, which this program uses as it is.

#include "examples/common/train_cli.h"

int main(int argc, char** argv) {
  using namespace reprise;
  train_cli::Program program;
  program.name = "llama_train";
  program.summary =
      "Trains a Llama on bytes (vocabulary: the 256 byte values) or on a tokenizer's\n"
      "ids (--tokenizer). With no flags it trains the default small model on the\n"
      "built-in corpus and prints a progress line every --log-every steps and a\n"
      "held-out loss every --eval-every steps.\n";
  program.hf_model = "model (any family, nn/model_config.h)";
  return train_cli::run_program(program, argc, argv);
}
