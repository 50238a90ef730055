import { describe, expect, it } from 'vitest'
import {
  buildTarget,
  ID_MAX_LENGTH,
  matchPath,
  PAGE_MAX_LIMIT,
  ProtocolError,
  readRequest,
  routes,
  SEARCH_MAX_TERMS,
  SEARCH_MAX_TEXT,
  SEARCH_PAGE_MAX_LIMIT,
  searchRequest,
  searchTerms,
} from '../src/index.js'

function refusal(fn: () => unknown): string {
  try {
    fn()
  } catch (error) {
    if (error instanceof ProtocolError) return `${error.code}: ${error.message}`
    throw error
  }
  throw new Error('expected a ProtocolError')
}

describe('buildTarget', () => {
  it('puts each id in one percent-encoded segment and the query in schema order', () => {
    expect(buildTarget(routes.history, { id: 'a/b?c' }, { limit: 2, before: 5 })).toBe('/api/sessions/a%2Fb%3Fc/history?before=5&limit=2')
    expect(buildTarget(routes.childHistory, { parentId: '../p', childId: '会话' }, {})).toBe(
      `/api/sessions/..%2Fp/subagents/${encodeURIComponent('会话')}/history`,
    )
    expect(buildTarget(routes.listSessions, {}, { origin: 'subagent', cursor: undefined })).toBe('/api/sessions?origin=subagent')
  })

  it('refuses, before anything is sent, values the host would refuse', () => {
    expect(refusal(() => buildTarget(routes.history, { id: '..' }))).toMatch(
      /^PROTOCOL_INVALID_ARGUMENT: The path parameter "id" is a dot segment/,
    )
    expect(refusal(() => buildTarget(routes.history, { id: '' }))).toContain('"id" is empty')
    expect(refusal(() => buildTarget(routes.history, { id: 'x'.repeat(ID_MAX_LENGTH + 1) }))).toContain(`longer than ${ID_MAX_LENGTH}`)
    expect(refusal(() => buildTarget(routes.history, { id: 'a\u0000b' }))).toContain('"id" contains a NUL character')
    expect(refusal(() => buildTarget(routes.history, { id: 'a\ud800b' }))).toContain('"id" contains a lone surrogate')
    expect(buildTarget(routes.history, { id: '🦀.' })).toBe(`/api/sessions/${encodeURIComponent('🦀.')}/history`)
    expect(refusal(() => buildTarget(routes.listSessions, {}, { limit: PAGE_MAX_LIMIT + 1 }))).toContain(
      `"limit" must be an integer from 1 to ${PAGE_MAX_LIMIT}`,
    )
    expect(refusal(() => buildTarget(routes.search, {}, { q: 'a', limit: SEARCH_PAGE_MAX_LIMIT + 1 }))).toContain(
      `from 1 to ${SEARCH_PAGE_MAX_LIMIT}`,
    )
    expect(refusal(() => buildTarget(routes.search, {}, { q: '  ' }))).toContain('no word')
  })
})

describe('readRequest', () => {
  it('reads strings into typed values', () => {
    const reading = readRequest(routes.listSessions, {}, { limit: '20', createdFrom: '0', origin: 'subagent' })
    expect(reading).toEqual({ ok: true, params: {}, query: { limit: 20, createdFrom: 0, origin: 'subagent' } })
  })

  it('refuses unknown parameters, malformed integers and bad choices with a sentence naming the value', () => {
    const message = (query: Record<string, string>) => {
      const reading = readRequest(routes.listSessions, {}, query)
      return reading.ok ? 'ok' : reading.message
    }
    expect(message({ colour: 'red' })).toBe(
      'Unknown query parameter "colour"; this route accepts "parentSession", "origin", "cwd", "createdFrom", "createdTo", "limit", "cursor".',
    )
    for (const bad of ['0', '1001', '-1', '1.5', '1e2', '+3', '', '0x10', '99999999999999999']) {
      expect(message({ limit: bad }), bad).toBe(`The query parameter "limit" must be an integer from 1 to ${PAGE_MAX_LIMIT}, got "${bad}".`)
    }
    expect(message({ origin: 'human' })).toBe('The query parameter "origin" must be one of "subagent", got "human".')
    const search = readRequest(routes.search, {}, {})
    expect(search.ok ? 'ok' : search.message).toBe('The query parameter "q" is required.')
  })

  it('matches paths segment by segment, capturing parameters', () => {
    expect(matchPath(routes.childHistory, ['api', 'sessions', 'p', 'subagents', 'a/b', 'history'])).toEqual({
      parentId: 'p',
      childId: 'a/b',
    })
    expect(matchPath(routes.history, ['api', 'sessions', 'p', 'subagents'])).toBeUndefined()
  })
})

describe('search limits', () => {
  it('count distinct terms only, lower-cased, in first-seen order', () => {
    expect(searchTerms('The the THE cat, the—cat! 42')).toEqual(['the', 'cat', '42'])
    expect(searchTerms('ESC[2J; DROP TABLE')).toEqual(['esc', '2j', 'drop', 'table'])
    expect(searchTerms(' \u0000 ')).toEqual([])
  })

  it('accept a word repeated up to the text limit and refuse too many distinct words', () => {
    const repeated = Array.from({ length: 249 }, () => 'the').join(' ')
    expect(searchRequest.safeParse({ text: repeated }).success).toBe(true)
    const distinct = Array.from({ length: SEARCH_MAX_TERMS + 1 }, (_, i) => `w${i}`).join(' ')
    const refused = searchRequest.safeParse({ text: distinct })
    expect(refused.success).toBe(false)
    expect(refused.error?.issues[0]?.message).toBe(
      `holds ${SEARCH_MAX_TERMS + 1} distinct words; at most ${SEARCH_MAX_TERMS} are searched at once`,
    )
    expect(searchRequest.safeParse({ text: distinct.split(' ').slice(0, SEARCH_MAX_TERMS).join(' ') }).success).toBe(true)
    expect(searchRequest.safeParse({ text: 'a'.repeat(SEARCH_MAX_TEXT + 1) }).success).toBe(false)
    expect(searchRequest.safeParse({ text: 'x', limit: SEARCH_PAGE_MAX_LIMIT + 1 }).success).toBe(false)
  })
})
