import { readRequest, routes } from '@dsh/protocol'
import { HTTP_HEADERS_TIMEOUT_MS, HTTP_IDLE_TIMEOUT_MS, HTTP_MAX_CONNECTIONS, HTTP_REQUEST_TIMEOUT_MS } from '@dsh/protocol/limits'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { ApiError } from '../src/errors.js'
import { DEFAULT_LIMITS, resolveLimits } from '../src/limits.js'
import { parseTarget, unknownQueryParameter } from '../src/request.js'

const limits = DEFAULT_LIMITS

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn()
  } catch (error) {
    return error instanceof ApiError ? error.code : `not an ApiError: ${String(error)}`
  }
  return undefined
}

describe('parseTarget', () => {
  it('splits and decodes path segments without resolving dot segments', () => {
    const { segments } = parseTarget('/api/sessions/a%2Fb/../history', limits)
    expect(segments).toEqual(['api', 'sessions', 'a/b', '..', 'history'])
  })

  it('decodes "+" as a space in the query only', () => {
    const { segments, query } = parseTarget('/api/a+b?q=x+y%2B', limits)
    expect(segments).toEqual(['api', 'a+b'])
    expect(query).toEqual({ q: 'x y+' })
  })

  it('refuses malformed percent-encoding, invalid UTF-8 and NUL', () => {
    expect(codeOf(() => parseTarget('/api/sessions/%zz/history', limits))).toBe('API_BAD_REQUEST')
    expect(codeOf(() => parseTarget('/api/sessions/%E0%A4%A/history', limits))).toBe('API_BAD_REQUEST')
    expect(codeOf(() => parseTarget('/api/sessions/%C0%80', limits))).toBe('API_BAD_REQUEST')
    expect(codeOf(() => parseTarget('/api/sessions/a%00b', limits))).toBe('API_BAD_REQUEST')
    expect(codeOf(() => parseTarget('/api/search?q=%00', limits))).toBe('API_BAD_REQUEST')
    expect(codeOf(() => parseTarget('/api/search?q=%', limits))).toBe('API_BAD_REQUEST')
  })

  it('refuses targets that are not origin-form paths or carry a fragment', () => {
    expect(codeOf(() => parseTarget('http://example.com/api', limits))).toBe('API_BAD_REQUEST')
    expect(codeOf(() => parseTarget('*', limits))).toBe('API_BAD_REQUEST')
    expect(codeOf(() => parseTarget('/api#x', limits))).toBe('API_BAD_REQUEST')
  })

  it('refuses a target longer than maxUrlLength with API_URI_TOO_LONG', () => {
    const small = resolveLimits({ maxUrlLength: 64 })
    expect(codeOf(() => parseTarget(`/${'a'.repeat(64)}`, small))).toBe('API_URI_TOO_LONG')
    expect(codeOf(() => parseTarget(`/${'a'.repeat(62)}`, small))).toBeUndefined()
  })

  it('refuses a repeated query parameter, and a parameter named like an Object property is just a name', () => {
    expect(codeOf(() => parseTarget('/x?limit=1&limit=2', limits))).toBe('API_BAD_REQUEST')
    const { query } = parseTarget('/x?__proto__=1&constructor=2', limits)
    expect(Object.keys(query)).toEqual(['__proto__', 'constructor'])
    expect(Object.getPrototypeOf(query)).toBeNull()
    expect(readRequest(routes.listSessions, {}, query)).toMatchObject({
      ok: false,
      message: expect.stringContaining('Unknown query parameter "__proto__"'),
    })
  })

  it('names an unknown parameter of a token-only route cut to 64 code units, never inside a character', () => {
    const error = unknownQueryParameter(`x${'\u{1f600}'.repeat(40)}`, 'this page')
    expect(error.code).toBe('API_BAD_REQUEST')
    // Unit 64 is the first half of an emoji: the cut leaves it out whole.
    expect(error.message).toBe(`Unknown query parameter "x${'\u{1f600}'.repeat(31)}"; this page takes none but the token.`)
    expect(unknownQueryParameter('a', 'an attachment').message).toBe('Unknown query parameter "a"; an attachment takes none but the token.')
    expect(unknownQueryParameter('token', '/app.js', 'public').message).toBe(
      'Unknown query parameter "token"; /app.js takes no query parameters.',
    )
  })

  it('round-trips any encodable id through one path segment and the history route', () => {
    const idArb = fc
      .string({ unit: 'grapheme', minLength: 1, maxLength: 64 })
      .filter((s) => !s.includes('\u0000') && s !== '.' && s !== '..')
    fc.assert(
      fc.property(idArb, (id) => {
        const { segments } = parseTarget(`/api/sessions/${encodeURIComponent(id)}/history`, limits)
        expect(segments).toEqual(['api', 'sessions', id, 'history'])
        expect(readRequest(routes.history, { id: segments[2]! }, {})).toEqual({ ok: true, params: { id }, query: {} })
      }),
    )
  })
})

describe('resolveLimits', () => {
  it('fills defaults and refuses nonsense, and request bounds that belong to the protocol', () => {
    expect(resolveLimits({ maxStreams: 10 }).maxStreams).toBe(10)
    expect(resolveLimits().maxBodyBytes).toBe(DEFAULT_LIMITS.maxBodyBytes)
    expect(codeOf(() => resolveLimits({ maxBodyBytes: 0 }))).toBe('API_INVALID_OPTIONS')
    expect(codeOf(() => resolveLimits({ heartbeatMs: 1.5 }))).toBe('API_INVALID_OPTIONS')
    expect(codeOf(() => resolveLimits({ maxPageSize: 10 } as never))).toBe('API_INVALID_OPTIONS')
  })

  it('takes the connection defaults from @dsh/protocol/limits and refuses a headers timeout longer than the request timeout', () => {
    expect(DEFAULT_LIMITS).toMatchObject({
      maxConnections: HTTP_MAX_CONNECTIONS,
      idleTimeoutMs: HTTP_IDLE_TIMEOUT_MS,
      headersTimeoutMs: HTTP_HEADERS_TIMEOUT_MS,
      requestTimeoutMs: HTTP_REQUEST_TIMEOUT_MS,
    })
    expect(resolveLimits({ headersTimeoutMs: 500, requestTimeoutMs: 500 }).headersTimeoutMs).toBe(500)
    expect(codeOf(() => resolveLimits({ headersTimeoutMs: 501, requestTimeoutMs: 500 }))).toBe('API_INVALID_OPTIONS')
    expect(codeOf(() => resolveLimits({ maxConnections: 0 }))).toBe('API_INVALID_OPTIONS')
  })
})
