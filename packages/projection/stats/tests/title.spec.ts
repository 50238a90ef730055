import { describe, expect, it } from 'vitest'
import { appendSessionTitle, normalizeTitle, SESSION_TITLE_EVENT, TITLE_MAX_LENGTH } from '../src/index.js'
import { host } from './helpers.js'

describe('normalizeTitle', () => {
  it.each([
    ['collapses whitespace and trims', '  plan \n\n the\trelease  ', 'plan the release'],
    ['turns other control characters into a space', 'a\u0000b\u0007c\u007fd\u0085e', 'a b c d e'],
    ['removes terminal escape sequences whole', '\u001b[31mred\u001b[0m \u001b]0;window title\u0007text \u001b[2Jclear', 'red text clear'],
    ['removes bidi controls and invisible format characters', 'abc\u202edcba\u202c \u2066x\u2069\u200b\ufeffy\u200e', 'abcdcba xy'],
    ['keeps joiners inside emoji and scripts', 'team 👩‍💻 ready', 'team 👩‍💻 ready'],
    ['turns non-breaking and ideographic spaces into one space', 'a\u00a0\u00a0b\u3000c', 'a b c'],
    ['replaces lone surrogates', 'x\ud800y', 'x\ufffdy'],
    ['is empty for nothing but noise', ' \u001b[0m\u200f\n ', ''],
  ])('%s', (_why, input, output) => {
    expect(normalizeTitle(input)).toBe(output)
  })

  it('caps at 80 graphemes with an ellipsis, never inside a grapheme', () => {
    expect(TITLE_MAX_LENGTH).toBe(80)
    const exact = 'x'.repeat(80)
    expect(normalizeTitle(exact)).toBe(exact)
    const long = normalizeTitle('word '.repeat(40))
    expect(long).toBe(`${'word '.repeat(15)}word…`)
    expect([...new Intl.Segmenter('und', { granularity: 'grapheme' }).segment(long)]).toHaveLength(80)
    const emoji = normalizeTitle('👩‍👩‍👧‍👦'.repeat(100))
    expect(emoji).toBe(`${'👩‍👩‍👧‍👦'.repeat(79)}…`)
    // 80 family emoji are 80 graphemes (but 880 code units): not cut.
    expect(normalizeTitle('👩‍👩‍👧‍👦'.repeat(80))).toBe('👩‍👩‍👧‍👦'.repeat(80))
    expect(normalizeTitle('abcdef', 4)).toBe('abc…')
  })
})

describe('normalizeTitle on long text', () => {
  // The whole-text algorithm, as an oracle: normalizeTitle cleans a prefix only, and must agree with it.
  const segmenter = new Intl.Segmenter('und', { granularity: 'grapheme' })
  function wholeText(text: string, maxLength = TITLE_MAX_LENGTH): string {
    const clean = text
      .replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd')
      // biome-ignore lint/suspicious/noControlCharactersInRegex: the terminal escapes a title drops are control characters
      .replace(/\u001b\[[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)?|\u001b[@-Z\\-_]?|\u009b[0-?]*[ -/]*[@-~]/g, '')
      .replace(/[\u061c\u200b\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]/g, '')
      .replace(/\p{Cc}/gu, ' ')
      .replace(/\s+/gu, ' ')
      .trim()
    const graphemes = Array.from(segmenter.segment(clean), (x) => x.segment)
    return graphemes.length <= maxLength
      ? clean
      : `${graphemes
          .slice(0, maxLength - 1)
          .join('')
          .trimEnd()}…`
  }

  it('agrees with cleaning the whole text, wherever the prefix it cleans ends (escapes, whitespace runs, emoji, surrogates)', () => {
    const pieces = ['word ', '\u001b[31m', '  \n\t ', '👩‍👩‍👧‍👦', '\ud800', 'é', '\u202e', '\u001b]0;t\u0007', 'x']
    let seed = 7
    const next = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31
      return seed
    }
    for (let round = 0; round < 300; round++) {
      let text = ''
      const length = next() % 4000
      while (text.length < length) text += pieces[next() % pieces.length]
      expect(normalizeTitle(text), JSON.stringify(text.slice(0, 60))).toBe(wholeText(text))
      expect(normalizeTitle(text, 5)).toBe(wholeText(text, 5))
    }
  })

  it('titles a prompt of megabytes like a short one (a long noise prefix included)', () => {
    const huge = 'a'.repeat(7 * 1024 * 1024)
    expect(normalizeTitle(huge)).toBe(`${'a'.repeat(79)}…`)
    const noisy = `${' \u001b[0m'.repeat(50_000)}plan the release ${'x'.repeat(2_000)}`
    expect(normalizeTitle(noisy)).toBe(`plan the release ${'x'.repeat(62)}…`)
    expect(normalizeTitle(noisy)).toBe(wholeText(noisy))
  })
})

describe('sessionTitle', () => {
  it('is the first prompt, normalized; a session/title event overrides it, the last one wins', () => {
    const h = host()
    const session = h.sessions.create()
    const title = () => h.projections.snapshot(session, ['sessionTitle']).sessionTitle
    expect(title()).toBeNull()
    session.append('user/message', { text: '  \n ' })
    expect(title()).toBeNull()
    session.append('user/message', { text: 'Plan\nthe   release\u202e' })
    session.append('user/message', { text: 'a later prompt' })
    expect(title()).toEqual({ title: 'Plan the release', source: 'prompt', seq: 1, inherited: false })
    appendSessionTitle(session, '  Release\tplan ')
    expect(title()).toEqual({ title: 'Release plan', source: 'event', seq: 3, inherited: false })
    // A driver's raw event is normalized too; one without a usable title is skipped.
    session.append(SESSION_TITLE_EVENT, { title: '\u001b[1mShip it\u001b[0m', source: { kind: 'provider' } })
    session.append(SESSION_TITLE_EVENT, { title: '   ' })
    session.append(SESSION_TITLE_EVENT, { name: 'no title field' })
    expect(title()).toEqual({ title: 'Ship it', source: 'event', seq: 4, inherited: false })
    expect(h.projections.checkpoint(session, ['sessionTitle']).sessionTitle?.state).toMatchObject({ skipped: 2 })
  })

  it('a fork shows its own title once it has one, the inherited title before', () => {
    const h = host()
    const parent = h.sessions.create()
    parent.append('user/message', { text: 'Plan the release' })
    appendSessionTitle(parent, 'Release plan')
    const child = h.sessions.fork(parent)
    const title = (session: typeof parent) => h.projections.snapshot(session, ['sessionTitle']).sessionTitle
    expect(title(child)).toEqual({ title: 'Release plan', source: 'event', seq: 1, inherited: true })
    child.append('user/message', { text: 'Review the changelog' })
    expect(title(child)).toEqual({ title: 'Review the changelog', source: 'prompt', seq: 2, inherited: false })
    appendSessionTitle(child, 'Changelog review')
    expect(title(child)).toEqual({ title: 'Changelog review', source: 'event', seq: 3, inherited: false })
    expect(title(parent)).toEqual({ title: 'Release plan', source: 'event', seq: 1, inherited: false })
    expect(h.projections.fold(child.events, { inheritedEventCount: child.inheritedEventCount }, ['sessionTitle'])).toEqual({
      sessionTitle: title(child),
    })
  })

  it('appendSessionTitle refuses an empty or non-string title with a typed error and appends nothing', () => {
    const h = host()
    const session = h.sessions.create()
    for (const bad of ['', ' \n\t ', '\u200f\u001b[0m', 42 as unknown as string]) {
      expect(() => appendSessionTitle(session, bad)).toThrow(expect.objectContaining({ code: 'SESSION_STATS_INVALID_TITLE' }))
    }
    expect(session.seq).toBe(0)
  })
})
