// The rules index backends share (eventText, the search request and its
// cursors), tested once where they are defined; the backends' own suites
// test them again through their engines.
import { SEARCH_PAGE_DEFAULT_LIMIT } from '@dsh/protocol/limits'
import { SessionSeq, type StoredSessionEvent } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import { eventText, MAX_EVENT_TEXT } from '../src/backend.js'
import { checkSearchGeneration, encodeSearchCursor, parseSearchRequest, SEARCH_MAX_OFFSET } from '../src/backend-reads.js'

function event(type: string, data: unknown): StoredSessionEvent {
  return { type, seq: SessionSeq(0), time: 0, data } as StoredSessionEvent
}

describe('eventText', () => {
  it('takes messages, tool calls (name and string arguments) and tool results; leaves chunks and other types out', () => {
    expect(eventText(event('user/message', { text: '  hello  ' }))).toBe('hello')
    expect(eventText(event('assistant/message', { turn: 1, text: 'done' }))).toBe('done')
    expect(eventText(event('tool/call', { turn: 1, callId: 'c', name: 'grep', arguments: { pattern: 'foo', n: 3, deep: ['bar'] } }))).toBe(
      'grep foo bar',
    )
    expect(eventText(event('tool/result', { turn: 1, callId: 'c', content: [{ type: 'text', text: 'found' }] }))).toBe('text found')
    expect(eventText(event('assistant/chunk', { turn: 1, index: 0, delta: 'partial' }))).toBeUndefined()
    expect(eventText(event('turn/end', { turn: 1, reason: 'completed' }))).toBeUndefined()
    expect(eventText(event('user/message', { text: '   ' }))).toBeUndefined()
    expect(eventText(event('user/message', null))).toBeUndefined()
  })

  it('cuts text at MAX_EVENT_TEXT characters', () => {
    const text = eventText(event('user/message', { text: 'x'.repeat(MAX_EVENT_TEXT + 10) }))
    expect(text).toHaveLength(MAX_EVENT_TEXT)
  })

  it('cuts between characters: an emoji across the bound is left out whole, not split into a lone surrogate', () => {
    const text = eventText(event('user/message', { text: `${'x'.repeat(MAX_EVENT_TEXT - 1)}\u{1f600}tail` }))!
    expect(text).toBe('x'.repeat(MAX_EVENT_TEXT - 1))
    const fits = eventText(event('user/message', { text: `${'x'.repeat(MAX_EVENT_TEXT - 2)}\u{1f600}tail` }))!
    expect(fits.endsWith('\u{1f600}')).toBe(true)
    expect(fits).toHaveLength(MAX_EVENT_TEXT)
  })

  it("runs a backend's clean step before trimming, so text of unstorable characters only is empty", () => {
    const clean = (text: string) => text.replaceAll('\u0000', ' ')
    expect(eventText(event('user/message', { text: 'a\u0000b' }), clean)).toBe('a b')
    expect(eventText(event('user/message', { text: '\u0000\u0000' }), clean)).toBeUndefined()
    expect(eventText(event('user/message', { text: '\u0000\u0000' }))).toBe('\u0000\u0000')
  })
})

describe('parseSearchRequest', () => {
  it('validates the request and reads back the cursor it issues, bound to the backend tag, kind and request', () => {
    const first = parseSearchRequest({ text: 'Failing TEST failing' }, 'events', 'tag-a')
    expect(first).toMatchObject({ words: ['failing', 'test'], limit: SEARCH_PAGE_DEFAULT_LIMIT, offset: 0 })
    const cursor = encodeSearchCursor('events', 'tag-a', first, 'g1', 20)!
    expect(parseSearchRequest({ text: 'failing test', cursor }, 'events', 'tag-a')).toMatchObject({ offset: 20, generation: 'g1' })
    for (const [request, kind, tag] of [
      [{ text: 'failing test', cursor }, 'events', 'tag-b'],
      [{ text: 'failing test', cursor }, 'sessions', 'tag-a'],
      [{ text: 'other words', cursor }, 'events', 'tag-a'],
    ] as const)
      expect(() => parseSearchRequest(request, kind, tag)).toThrow(expect.objectContaining({ code: 'SESSION_QUERY_INVALID_CURSOR' }))
    for (const request of [null, [], { text: 'x', extra: 1 }, { text: 'x', limit: 0 }, { text: '!!!' }])
      expect(() => parseSearchRequest(request, 'events', 'tag-a')).toThrow(
        expect.objectContaining({ code: 'SESSION_QUERY_INVALID_FILTER' }),
      )
  })

  it('issues no cursor past SEARCH_MAX_OFFSET and refuses a cursor of another index generation', () => {
    const search = parseSearchRequest({ text: 'x' }, 'sessions', 't')
    expect(encodeSearchCursor('sessions', 't', search, 'g', SEARCH_MAX_OFFSET + 1)).toBeUndefined()
    const next = parseSearchRequest({ text: 'x', cursor: encodeSearchCursor('sessions', 't', search, 'g1', 5) }, 'sessions', 't')
    expect(() => checkSearchGeneration(next, 'g1')).not.toThrow()
    expect(() => checkSearchGeneration(next, 'g2')).toThrow(expect.objectContaining({ code: 'SESSION_QUERY_STALE_CURSOR' }))
    expect(() => checkSearchGeneration(search, 'g2')).not.toThrow()
  })
})
