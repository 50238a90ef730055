import { textHead } from '@dsh/context'
import { ApiError } from './errors.js'
import type { ApiLimits } from './limits.js'

/** A request target split into strictly decoded path segments and query parameters (each name at most once). */
export interface ParsedTarget {
  readonly segments: readonly string[]
  readonly query: Readonly<Record<string, string>>
}

/**
 * Parses the raw request target exactly as sent. It is deliberately not run
 * through `new URL()`: WHATWG URL parsing resolves `..` segments (also
 * `%2e%2e`), which would let `/api/sessions/x/subagents/../history` reach a
 * different route than the one the caller spelled. Values are only decoded
 * here; the route's protocol schemas bound and type them.
 */
export function parseTarget(rawTarget: string, limits: ApiLimits): ParsedTarget {
  if (rawTarget.length > limits.maxUrlLength) {
    throw new ApiError(
      'API_URI_TOO_LONG',
      `The request target is ${rawTarget.length} bytes; this host accepts at most ${limits.maxUrlLength}.`,
    )
  }
  if (!rawTarget.startsWith('/')) throw new ApiError('API_BAD_REQUEST', 'The request target must be a path starting with "/".')
  if (rawTarget.includes('#')) throw new ApiError('API_BAD_REQUEST', 'The request target must not contain a fragment ("#").')
  const questionMark = rawTarget.indexOf('?')
  const rawPath = questionMark === -1 ? rawTarget : rawTarget.slice(0, questionMark)
  const rawQuery = questionMark === -1 ? '' : rawTarget.slice(questionMark + 1)
  const segments = rawPath
    .slice(1)
    .split('/')
    .map((segment, index) => decodeComponent(segment, `path segment ${index + 1}`, false))
  const query: Record<string, string> = Object.create(null)
  for (const piece of rawQuery.split('&')) {
    if (piece.length === 0) continue
    const equals = piece.indexOf('=')
    const name = decodeComponent(equals === -1 ? piece : piece.slice(0, equals), 'query parameter name', true)
    const value = decodeComponent(equals === -1 ? '' : piece.slice(equals + 1), `query parameter "${name}"`, true)
    if (Object.hasOwn(query, name)) throw new ApiError('API_BAD_REQUEST', `The query parameter "${name}" is given more than once.`)
    query[name] = value
  }
  return { segments, query }
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
  if (decoded.includes('\u0000'))
    throw new ApiError('API_BAD_REQUEST', `The ${what} contains a NUL character, which no id or parameter may hold.`)
  return decoded
}

/**
 * The 400 for a query parameter on a route that takes none but the token
 * (`public`: none at all, not even the token): `route` names it ("an
 * attachment", "this page"); the parameter's name is shown cut to 64 code
 * units, between characters.
 */
export function unknownQueryParameter(name: string, route: string, auth: 'token' | 'public' = 'token'): ApiError {
  const takes = auth === 'public' ? 'takes no query parameters' : 'takes none but the token'
  return new ApiError('API_BAD_REQUEST', `Unknown query parameter "${textHead(name, 64)}"; ${route} ${takes}.`)
}
