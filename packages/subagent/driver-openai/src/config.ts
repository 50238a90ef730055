import { DriverOpenAIError } from './errors.js'

/** Environment variables read for the API key, in order. */
export const API_KEY_ENV = ['DSH_API_KEY', 'OPENAI_API_KEY'] as const
/** Environment variables read for the base URL, in order. */
export const BASE_URL_ENV = ['DSH_BASE_URL', 'OPENAI_BASE_URL'] as const
/** Environment variable read for the model. */
export const MODEL_ENV = 'DSH_MODEL'

export const DEFAULT_BASE_URL = 'https://api.deepseek.com'
/** The default model: DeepSeek's fast model (`deepseek-chat` is not a model name DeepSeek serves). */
export const DEFAULT_MODEL = 'deepseek-v4-flash'

/** The wire protocols the client speaks: Chat Completions, or Responses. */
export const MODEL_APIS = ['chat', 'responses'] as const
export type ModelApi = (typeof MODEL_APIS)[number]

export interface ModelConfigInput {
  /** Which API the agent's requests use (default `chat`): Chat Completions, or Responses with `previous_response_id` chains. */
  readonly api?: ModelApi
  /** Chat Completions base URL (default: `DSH_BASE_URL`, `OPENAI_BASE_URL`, then DeepSeek's). */
  readonly baseURL?: string
  /** Model name (default: `DSH_MODEL`, then `deepseek-v4-flash`). */
  readonly model?: string
  /** The API key (default: `DSH_API_KEY`, then `OPENAI_API_KEY`). Never logged, never recorded. */
  readonly apiKey?: string
  /** Where the defaults are read from (default `process.env`). */
  readonly env?: Readonly<Record<string, string | undefined>>
}

export interface ModelConfig {
  readonly api: ModelApi
  readonly baseURL: string
  readonly model: string
  /** Replaces every occurrence of the API key in `text`. */
  readonly redact: (text: string) => string
  /** The key itself: handed to the HTTP client and nowhere else. */
  readonly apiKey: string
}

/** Resolves options over the environment; the key is validated but never echoed. */
export function resolveModelConfig(input: ModelConfigInput = {}): ModelConfig {
  const env = input.env ?? process.env
  const pick = (names: readonly string[]): string | undefined => {
    for (const name of names) {
      const value = env[name]
      if (value !== undefined && value.length > 0) return value
    }
    return undefined
  }
  const baseURL = input.baseURL ?? pick(BASE_URL_ENV) ?? DEFAULT_BASE_URL
  let parsed: URL
  try {
    parsed = new URL(baseURL)
  } catch {
    throw new DriverOpenAIError(
      'DRIVER_OPENAI_INVALID_OPTIONS',
      `The base URL ${JSON.stringify(baseURL)} is not a URL; pass e.g. http://127.0.0.1:11434/v1.`,
    )
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new DriverOpenAIError('DRIVER_OPENAI_INVALID_OPTIONS', `The base URL must be http(s), got ${JSON.stringify(parsed.protocol)}.`)
  }
  if (parsed.username !== '' || parsed.password !== '') {
    throw new DriverOpenAIError(
      'DRIVER_OPENAI_INVALID_OPTIONS',
      'The base URL must not carry credentials; put the key in DSH_API_KEY instead.',
    )
  }
  const model = input.model ?? env[MODEL_ENV] ?? DEFAULT_MODEL
  if (typeof model !== 'string' || model.trim().length === 0) {
    throw new DriverOpenAIError('DRIVER_OPENAI_INVALID_OPTIONS', 'The model name must be a non-empty string (--model or DSH_MODEL).')
  }
  const api = input.api ?? 'chat'
  if (!(MODEL_APIS as readonly string[]).includes(api)) {
    throw new DriverOpenAIError('DRIVER_OPENAI_INVALID_OPTIONS', `api must be one of ${MODEL_APIS.join(', ')}, got ${JSON.stringify(api)}.`)
  }
  const apiKey = input.apiKey ?? pick(API_KEY_ENV)
  if (apiKey === undefined || apiKey.length === 0) {
    throw new DriverOpenAIError(
      'DRIVER_OPENAI_NO_API_KEY',
      `No API key: set ${API_KEY_ENV.join(' or ')} (a local server that ignores keys accepts any value, e.g. DSH_API_KEY=local).`,
    )
  }
  return Object.freeze({ api, baseURL: parsed.toString().replace(/\/$/, ''), model, apiKey, redact: redactor(apiKey) })
}

/** A function that blanks `secret` out of any text (keys shorter than 4 characters are still blanked). */
export function redactor(secret: string): (text: string) => string {
  return (text) => (secret.length === 0 ? text : text.split(secret).join('[redacted]'))
}
