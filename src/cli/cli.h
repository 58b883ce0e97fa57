/* cli/ — subcommands of the staticlm executable. Each returns a process exit code. */
#ifndef SLM_CLI_H
#define SLM_CLI_H

/* staticlm convert: llama2.c checkpoint (+ tokenizer.bin) -> GGUF. */
int slm_cli_convert(int argc, char **argv);

#endif
