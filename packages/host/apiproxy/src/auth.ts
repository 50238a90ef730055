import { createHash, timingSafeEqual } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { AuthMode as ProtocolAuthMode } from '@dsh/protocol'
import { ApiError } from './errors.js'

/** How a route accepts the token: the API routes' modes (`@dsh/protocol`), plus `public` for the page's static assets that hold no data. */
export type AuthMode = ProtocolAuthMode | 'public'

/** Compares tokens in constant time (over fixed-length digests, so the length does not leak either). */
export function createTokenCheck(token: string): (candidate: string) => boolean {
  if (token.length < 16) {
    throw new ApiError(
      'API_INVALID_OPTIONS',
      'The API token must be at least 16 characters; generate one with crypto.randomBytes(32).toString("base64url").',
    )
  }
  // A bearer token is one word of an HTTP header: a space, line break, control or non-ASCII character could never be sent.
  if (!/^[\x21-\x7e]+$/.test(token)) {
    throw new ApiError(
      'API_INVALID_OPTIONS',
      'The API token must be printable ASCII without spaces (no line break, control or non-ASCII character), as an Authorization header carries it; generate one with crypto.randomBytes(32).toString("base64url").',
    )
  }
  const expected = digest(token)
  return (candidate) => timingSafeEqual(digest(candidate), expected)
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest()
}

/** Throws `API_UNAUTHORIZED` unless the request carries the token in a way `mode` accepts. */
export function authenticate(
  req: IncomingMessage,
  query: Readonly<Record<string, string>>,
  mode: AuthMode,
  check: (candidate: string) => boolean,
): void {
  if (mode === 'public') return
  const header = req.headers.authorization
  if (header !== undefined) {
    const match = /^Bearer +(\S+) *$/i.exec(header)
    if (match?.[1] !== undefined && check(match[1])) return
    throw unauthorized('The Authorization header does not carry the right bearer token.')
  }
  const token = query.token
  if (mode === 'header-or-query' && token !== undefined) {
    if (check(token)) return
    throw unauthorized('The token query parameter is wrong.')
  }
  throw unauthorized(
    mode === 'header-or-query'
      ? 'This route needs the API token: send "Authorization: Bearer <token>" or add ?token=<token>.'
      : 'This route needs the API token: send "Authorization: Bearer <token>".',
  )
}

function unauthorized(message: string): ApiError {
  return new ApiError('API_UNAUTHORIZED', message)
}
