import { redactor } from '@dsh/driver-openai'
import { DriverAnthropicError } from './errors.js'

/** Environment variables read for the API key, in order. */
export const ANTHROPIC_API_KEY_ENV = ['DSH_API_KEY', 'ANTHROPIC_API_KEY'] as const
/** Environment variables read for the base URL, in order. */
export const ANTHROPIC_BASE_URL_ENV = ['DSH_BASE_URL', 'ANTHROPIC_BASE_URL'] as const
/** Environment variable read for the model. */
export const ANTHROPIC_MODEL_ENV = 'DSH_MODEL'

export const ANTHROPIC_DEFAULT_BASE_URL = 'https://api.anthropic.com'
/** The default model: the newest Sonnet the pinned SDK names. */
export const ANTHROPIC_DEFAULT_MODEL = 'claude-sonnet-5-5'
/** The default `max_tokens` of one model call (the API requires one). */
export const ANTHROPIC_DEFAULT_MAX_TOKENS = 16_000

export interface AnthropicConfigInput {
  /** The API's base URL, without `/v1` (default: `DSH_BASE_URL`, `ANTHROPIC_BASE_URL`, then Anthropic's). */
  readonly baseURL?: string
  /** Model name (default: `DSH_MODEL`, then `claude-sonnet-5-5`). */
  readonly model?: string
  /** The API key (default: `DSH_API_KEY`, then `ANTHROPIC_API_KEY`). Never logged, never recorded. */
  readonly apiKey?: string
  /** Where the defaults are read from (default `process.env`). */
  readonly env?: Readonly<Record<string, string | undefined>>
  /** `max_tokens` of each call (default 16,000). */
  readonly maxTokens?: number
  /**
   * Extended thinking: the `budget_tokens` of each call (at least 1,024 and
   * below `maxTokens`); omit to call without thinking. Thinking blocks come
   * back with their signatures and are sent back in later requests.
   */
  readonly thinkingBudget?: number
}

export interface AnthropicConfig {
  readonly baseURL: string
  readonly model: string
  readonly maxTokens: number
  readonly thinkingBudget: number | undefined
  /** Replaces every occurrence of the API key in `text`. */
  readonly redact: (text: string) => string
  /** The key itself: handed to the HTTP client and nowhere else. */
  readonly apiKey: string
}

function invalid(message: string): DriverAnthropicError {
  return new DriverAnthropicError('DRIVER_ANTHROPIC_INVALID_OPTIONS', message)
}

/** Resolves options over the environment; the key is validated but never echoed. */
export function resolveAnthropicConfig(input: AnthropicConfigInput = {}): AnthropicConfig {
  const env = input.env ?? process.env
  const pick = (names: readonly string[]): string | undefined =>
    names.map((name) => env[name]).find((value) => value !== undefined && value.length > 0)
  const baseURL = input.baseURL ?? pick(ANTHROPIC_BASE_URL_ENV) ?? ANTHROPIC_DEFAULT_BASE_URL
  let parsed: URL
  try {
    parsed = new URL(baseURL)
  } catch {
    throw invalid(`The base URL ${JSON.stringify(baseURL)} is not a URL; pass e.g. https://api.anthropic.com.`)
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw invalid(`The base URL must be http(s), got ${JSON.stringify(parsed.protocol)}.`)
  if (parsed.username !== '' || parsed.password !== '')
    throw invalid('The base URL must not carry credentials; put the key in ANTHROPIC_API_KEY instead.')
  const model = input.model ?? pick([ANTHROPIC_MODEL_ENV]) ?? ANTHROPIC_DEFAULT_MODEL
  if (typeof model !== 'string' || model.trim().length === 0)
    throw invalid('The model name must be a non-empty string (--model or DSH_MODEL).')
  const maxTokens = input.maxTokens ?? ANTHROPIC_DEFAULT_MAX_TOKENS
  if (!Number.isSafeInteger(maxTokens) || maxTokens < 1) throw invalid(`maxTokens must be a positive integer, got ${String(maxTokens)}.`)
  const thinkingBudget = input.thinkingBudget
  if (thinkingBudget !== undefined && (!Number.isSafeInteger(thinkingBudget) || thinkingBudget < 1024 || thinkingBudget >= maxTokens)) {
    throw invalid(`thinkingBudget must be an integer from 1024 to maxTokens - 1 (${maxTokens - 1}), got ${String(thinkingBudget)}.`)
  }
  const apiKey = input.apiKey ?? pick(ANTHROPIC_API_KEY_ENV)
  if (apiKey === undefined || apiKey.length === 0) {
    throw new DriverAnthropicError(
      'DRIVER_ANTHROPIC_NO_API_KEY',
      `No API key: set ${ANTHROPIC_API_KEY_ENV.join(' or ')} (a local server that ignores keys accepts any value).`,
    )
  }
  return Object.freeze({
    baseURL: parsed.toString().replace(/\/$/, ''),
    model,
    maxTokens,
    thinkingBudget,
    apiKey,
    redact: redactor(apiKey),
  })
}
