import type { IncomingMessage } from 'node:http'
import { describe, expect, it } from 'vitest'
import { authenticate, createTokenCheck } from '../src/auth.js'
import { ApiError } from '../src/errors.js'
import { DEFAULT_LIMITS } from '../src/limits.js'
import { parseTarget } from '../src/request.js'

const token = 'correct-horse-battery-staple'
const check = createTokenCheck(token)

function attempt(authorization: string | undefined, target: string, mode: 'public' | 'header' | 'header-or-query'): string {
  const req = { headers: authorization === undefined ? {} : { authorization } } as IncomingMessage
  try {
    authenticate(req, parseTarget(target, DEFAULT_LIMITS).query, mode, check)
    return 'ok'
  } catch (error) {
    return error instanceof ApiError ? error.code : 'unexpected'
  }
}

describe('authenticate', () => {
  it('accepts the bearer token and refuses a wrong or missing one', () => {
    expect(attempt(`Bearer ${token}`, '/api/sessions', 'header')).toBe('ok')
    expect(attempt(`bearer ${token}`, '/api/sessions', 'header')).toBe('ok')
    expect(attempt(`Bearer ${token}x`, '/api/sessions', 'header')).toBe('API_UNAUTHORIZED')
    expect(attempt(`Basic ${token}`, '/api/sessions', 'header')).toBe('API_UNAUTHORIZED')
    expect(attempt(undefined, '/api/sessions', 'header')).toBe('API_UNAUTHORIZED')
  })

  it('takes ?token= only where the route allows it', () => {
    expect(attempt(undefined, `/api/sessions?token=${token}`, 'header')).toBe('API_UNAUTHORIZED')
    expect(attempt(undefined, `/?token=${token}`, 'header-or-query')).toBe('ok')
    expect(attempt(undefined, '/?token=nope', 'header-or-query')).toBe('API_UNAUTHORIZED')
    // A wrong header is not rescued by a right query token.
    expect(attempt('Bearer nope', `/?token=${token}`, 'header-or-query')).toBe('API_UNAUTHORIZED')
    expect(attempt(undefined, '/app.js', 'public')).toBe('ok')
  })

  it('refuses tokens too short to be secret', () => {
    expect(() => createTokenCheck('short')).toThrow(expect.objectContaining({ code: 'API_INVALID_OPTIONS' }))
  })

  it('refuses tokens no Authorization header can carry: a space, a line break, a control or a non-ASCII character', () => {
    for (const bad of [
      '0123456789abcdef\n0123456789abcdef',
      'two words 0123456789',
      '0123456789abcdef\t',
      '0123456789abcdef\u0000',
      'pässwörd-0123456789',
    ]) {
      expect(() => createTokenCheck(bad), JSON.stringify(bad)).toThrow(
        expect.objectContaining({ code: 'API_INVALID_OPTIONS', message: expect.stringContaining('printable ASCII without spaces') }),
      )
    }
    expect(() => createTokenCheck('A-z_0~9!#$%&*+.^|0123456789')).not.toThrow()
  })
})
