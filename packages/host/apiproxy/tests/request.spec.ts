import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { ApiError } from '../src/errors.js'
import { DEFAULT_LIMITS, resolveLimits } from '../src/limits.js'
import { parseId, parseTarget } from '../src/request.js'

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
    expect(query.string('q')).toBe('x y+')
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

  it('refuses repeated and unknown query parameters', () => {
    expect(codeOf(() => parseTarget('/x?limit=1&limit=2', limits))).toBe('API_BAD_REQUEST')
    const { query } = parseTarget('/x?limt=1', limits)
    expect(codeOf(() => query.allowOnly(['limit']))).toBe('API_BAD_REQUEST')
    expect(codeOf(() => parseTarget('/x?limit=1', limits).query.allowOnly(['limit']))).toBeUndefined()
  })

  it('parses bounded integers strictly', () => {
    const q = (text: string) => parseTarget(`/x?n=${text}`, limits).query
    expect(q('42').integer('n', 1, 100)).toBe(42)
    for (const bad of ['0', '101', '-1', '1.5', '1e2', '+3', '', '0x10', '99999999999999999']) {
      expect(codeOf(() => q(bad).integer('n', 1, 100)), bad).toBe('API_BAD_REQUEST')
    }
    expect(parseTarget('/x', limits).query.integer('n', 1, 100)).toBeUndefined()
  })

  it('bounds free-text and choice parameters', () => {
    const small = resolveLimits({ maxParamLength: 8 })
    expect(codeOf(() => parseTarget(`/x?q=${'a'.repeat(9)}`, small).query.string('q'))).toBe('API_BAD_REQUEST')
    expect(parseTarget('/x?kind=events', limits).query.choice('kind', ['sessions', 'events'])).toBe('events')
    expect(codeOf(() => parseTarget('/x?kind=all', limits).query.choice('kind', ['sessions', 'events']))).toBe('API_BAD_REQUEST')
  })

  it('round-trips any encodable id through one path segment', () => {
    const idArb = fc
      .string({ unit: 'grapheme', minLength: 1, maxLength: 64 })
      .filter((s) => !s.includes('\u0000') && s !== '.' && s !== '..')
    fc.assert(
      fc.property(idArb, (id) => {
        const { segments } = parseTarget(`/api/sessions/${encodeURIComponent(id)}/history`, limits)
        expect(segments).toEqual(['api', 'sessions', id, 'history'])
        expect(parseId(segments[2]!, 'id', limits)).toBe(id)
      }),
    )
  })
})

describe('parseId', () => {
  it('accepts ids with slashes, dots and unicode; refuses empty, dot segments, NUL and over-long ids', () => {
    for (const id of ['a/b', '../etc/passwd', 'a..b', '...', '💥 session', 'x'.repeat(1024)]) expect(parseId(id, 'id', limits)).toBe(id)
    for (const id of ['', '.', '..', 'a\u0000b', 'x'.repeat(1025), 'y'.repeat(10 * 1024)]) {
      expect(codeOf(() => parseId(id, 'id', limits)), JSON.stringify(id.slice(0, 8))).toBe('API_BAD_REQUEST')
    }
  })
})

describe('resolveLimits', () => {
  it('fills defaults and refuses nonsense', () => {
    expect(resolveLimits({ maxIdLength: 10 }).maxIdLength).toBe(10)
    expect(resolveLimits().maxBodyBytes).toBe(DEFAULT_LIMITS.maxBodyBytes)
    expect(codeOf(() => resolveLimits({ maxBodyBytes: 0 }))).toBe('API_INVALID_OPTIONS')
    expect(codeOf(() => resolveLimits({ maxPageSize: 1.5 }))).toBe('API_INVALID_OPTIONS')
    expect(codeOf(() => resolveLimits({ maxPageSize: 10, defaultPageSize: 20 }))).toBe('API_INVALID_OPTIONS')
  })
})
