import { ApiError } from './errors.js'
import type { ApiLimits } from './limits.js'

/** A request target split into strictly decoded path segments and query parameters. */
export interface ParsedTarget {
  readonly segments: readonly string[]
  readonly query: QueryParams
}

/**
 * Parses the raw request target exactly as sent. It is deliberately not run
 * through `new URL()`: WHATWG URL parsing resolves `..` segments (also
 * `%2e%2e`), which would let `/api/sessions/x/subagents/../history` reach a
 * different route than the one the caller spelled.
 */
export function parseTarget(rawTarget: string, limits: ApiLimits): ParsedTarget {
  if (rawTarget.length > limits.maxUrlLength) {
    throw new ApiError('API_URI_TOO_LONG', `The request target is ${rawTarget.length} bytes; this host accepts at most ${limits.maxUrlLength}.`)
  }
  if (!rawTarget.startsWith('/')) {
    throw new ApiError('API_BAD_REQUEST', 'The request target must be a path starting with "/".')
  }
  if (rawTarget.includes('#')) throw new ApiError('API_BAD_REQUEST', 'The request target must not contain a fragment ("#").')
  const questionMark = rawTarget.indexOf('?')
  const rawPath = questionMark === -1 ? rawTarget : rawTarget.slice(0, questionMark)
  const rawQuery = questionMark === -1 ? '' : rawTarget.slice(questionMark + 1)
  const segments = rawPath
    .slice(1)
    .split('/')
    .map((segment, index) => decodeComponent(segment, `path segment ${index + 1}`, false))
  return { segments, query: new QueryParams(rawQuery, limits) }
}

/**
 * Strict percent-decoding: malformed escapes and escapes that are not UTF-8
 * are refused (not passed through as literal text), and so is NUL.
 */
export function decodeComponent(raw: string, what: string, plusIsSpace: boolean): string {
  let decoded: string
  try {
    decoded = decodeURIComponent(plusIsSpace ? raw.replaceAll('+', ' ') : raw)
  } catch {
    throw new ApiError('API_BAD_REQUEST', `The ${what} has malformed percent-encoding; encode it with encodeURIComponent.`)
  }
  if (decoded.includes('\u0000')) throw new ApiError('API_BAD_REQUEST', `The ${what} contains a NUL character, which no id or parameter may hold.`)
  return decoded
}

/**
 * Validates a decoded id taken from the path or the query. `.` and `..` are
 * refused because HTTP clients and proxies resolve them as dot segments before
 * the request arrives, so they cannot name a session reliably.
 */
export function parseId(value: string, what: string, limits: ApiLimits): string {
  if (value.length === 0) throw new ApiError('API_BAD_REQUEST', `The ${what} is empty.`)
  if (value.length > limits.maxIdLength) {
    throw new ApiError('API_BAD_REQUEST', `The ${what} is ${value.length} characters long; ids are limited to ${limits.maxIdLength}.`)
  }
  if (value === '.' || value === '..') {
    throw new ApiError('API_BAD_REQUEST', `The ${what} "${value}" is a dot segment, which HTTP clients rewrite; such an id cannot be addressed by path.`)
  }
  if (value.includes('\u0000')) throw new ApiError('API_BAD_REQUEST', `The ${what} contains a NUL character.`)
  return value
}

/** Query parameters: each name at most once, values strictly decoded and bounded. */
export class QueryParams {
  readonly #values = new Map<string, string>()
  readonly #limits: ApiLimits

  constructor(rawQuery: string, limits: ApiLimits) {
    this.#limits = limits
    for (const piece of rawQuery.split('&')) {
      if (piece.length === 0) continue
      const equals = piece.indexOf('=')
      const name = decodeComponent(equals === -1 ? piece : piece.slice(0, equals), 'query parameter name', true)
      const value = decodeComponent(equals === -1 ? '' : piece.slice(equals + 1), `query parameter "${name}"`, true)
      if (this.#values.has(name)) throw new ApiError('API_BAD_REQUEST', `The query parameter "${name}" is given more than once.`)
      this.#values.set(name, value)
    }
  }

  /** Refuses parameters a route does not know, so a typo is not silently ignored. */
  allowOnly(allowed: readonly string[]): this {
    for (const name of this.#values.keys()) {
      if (!allowed.includes(name)) {
        const known = allowed.length === 0 ? 'none' : allowed.map((a) => `"${a}"`).join(', ')
        throw new ApiError('API_BAD_REQUEST', `Unknown query parameter "${truncate(name)}"; this route accepts ${known}.`)
      }
    }
    return this
  }

  has(name: string): boolean {
    return this.#values.has(name)
  }

  /** A free-text parameter (bounded by `maxParamLength`). */
  string(name: string): string | undefined {
    const value = this.#values.get(name)
    if (value !== undefined && value.length > this.#limits.maxParamLength) {
      throw new ApiError('API_BAD_REQUEST', `The query parameter "${name}" is ${value.length} characters long; the limit is ${this.#limits.maxParamLength}.`)
    }
    return value
  }

  /** An id-valued parameter (bounded by `maxIdLength`). */
  id(name: string): string | undefined {
    const value = this.#values.get(name)
    return value === undefined ? undefined : parseId(value, `query parameter "${name}"`, this.#limits)
  }

  /** A non-negative decimal integer within `[min, max]`. */
  integer(name: string, min: number, max: number): number | undefined {
    const value = this.#values.get(name)
    if (value === undefined) return undefined
    const n = /^[0-9]{1,16}$/.test(value) ? Number(value) : Number.NaN
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      throw new ApiError('API_BAD_REQUEST', `The query parameter "${name}" must be an integer from ${min} to ${max}, got "${truncate(value)}".`)
    }
    return n
  }

  /** One of `choices`. */
  choice<T extends string>(name: string, choices: readonly T[]): T | undefined {
    const value = this.#values.get(name)
    if (value === undefined) return undefined
    if (!(choices as readonly string[]).includes(value)) {
      throw new ApiError('API_BAD_REQUEST', `The query parameter "${name}" must be one of ${choices.map((c) => `"${c}"`).join(', ')}, got "${truncate(value)}".`)
    }
    return value as T
  }
}

function truncate(text: string): string {
  return text.length > 64 ? `${text.slice(0, 64)}…` : text
}
