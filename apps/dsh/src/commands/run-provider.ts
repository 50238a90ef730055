import {
  type AgentTurnOutcome,
  createModelClient,
  createOpenAIDriver,
  createOpenAISummarizer,
  type ModelApi,
  type OpenAIDriverOptions,
  type RunAgentOptions,
  runAgent,
} from '@dsh/driver-openai'
import type { SubagentDriver } from '@dsh/subagent'
import { type CommandIo, intOption, type ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'

/** The providers `dsh run --provider` speaks: OpenAI-compatible Chat Completions/Responses, or Anthropic Messages. */
export const RUN_PROVIDERS = ['openai', 'anthropic'] as const
export type RunProvider = (typeof RUN_PROVIDERS)[number]

/** One top-level turn's options, whichever the provider (the client is the model's own). */
export type TopTurnOptions = Omit<RunAgentOptions, 'client'>

/** What a driver is made with in `dsh run`, whichever the provider. */
export type RunDriverOptions = Pick<
  OpenAIDriverOptions,
  'onEvent' | 'context' | 'compaction' | 'attachments' | 'contextWindow' | 'maxSteps' | 'notices'
>

/** The model side of `dsh run`: the driver children run on, the summarizer, and the top-level turn, for one provider. */
export interface RunModel {
  readonly provider: RunProvider
  readonly model: string
  driver(options: RunDriverOptions): SubagentDriver
  /** Service `summarizer` over the same client (the host's compaction and its crash repair). */
  readonly summarizer: ReturnType<typeof createOpenAISummarizer>
  runAgent(options: TopTurnOptions): Promise<AgentTurnOutcome>
}

/** `--provider openai|anthropic` (default `openai`); anything else is `CLI_USAGE`. */
export function providerOf(command: ParsedCommand): RunProvider {
  const value = command.string('provider') ?? 'openai'
  if (!(RUN_PROVIDERS as readonly string[]).includes(value))
    throw new CliError('CLI_USAGE', `--provider must be one of ${RUN_PROVIDERS.join(', ')}, got '${value}'.`)
  return value as RunProvider
}

/**
 * The client for `--provider` over the environment: OpenAI-compatible
 * (`DSH_API_KEY` or `OPENAI_API_KEY`, `--api chat|responses`) or Anthropic
 * (`DSH_API_KEY` or `ANTHROPIC_API_KEY`, `--thinking TOKENS` for extended
 * thinking, loaded only when chosen). Configuration errors (no key, a bad
 * URL) throw here, before the root is touched; the key stays inside the
 * client, which redacts it from everything it writes.
 */
export async function runModelOf(
  command: ParsedCommand,
  io: CommandIo,
  settings: { readonly model?: string; readonly baseURL?: string; readonly api?: ModelApi },
): Promise<RunModel> {
  const provider = providerOf(command)
  const chosen = { env: io.env, ...(settings.model === undefined ? {} : { model: settings.model }) }
  const at = settings.baseURL === undefined ? {} : { baseURL: settings.baseURL }
  if (provider === 'openai') {
    if (command.string('thinking') !== undefined)
      throw new CliError('CLI_USAGE', '--thinking is for --provider anthropic (OpenAI models think on their own).')
    const client = createModelClient({ ...chosen, ...at, ...(settings.api === undefined ? {} : { api: settings.api }) })
    return {
      provider,
      model: client.model,
      driver: (options) => createOpenAIDriver({ client, ...options }),
      summarizer: createOpenAISummarizer({ client }),
      runAgent: (options) => runAgent({ client, ...options }),
    }
  }
  if (settings.api !== undefined) throw new CliError('CLI_USAGE', '--api is for --provider openai (Anthropic speaks Messages).')
  const anthropic = await import('@dsh/driver-anthropic')
  // The API's range for budget_tokens: at least 1024, below the calls' max_tokens (the client's default; the CLI sets none).
  const thinking = intOption(command, 'thinking', { min: 1024, max: anthropic.ANTHROPIC_DEFAULT_MAX_TOKENS - 1 })
  const client = anthropic.createAnthropicClient({ ...chosen, ...at, ...(thinking === undefined ? {} : { thinkingBudget: thinking }) })
  return {
    provider,
    model: client.model,
    driver: (options) => anthropic.createAnthropicDriver({ client, ...options }),
    summarizer: anthropic.createAnthropicSummarizer({ client }),
    runAgent: (options) => anthropic.runAgent({ client, ...options }),
  }
}
