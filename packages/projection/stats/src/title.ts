import type { Session, StoredSessionEvent } from '@dsh/session'
import type { ProjectionInitContext, SessionProjectionUnit } from '@dsh/session-projection'
import { SessionStatsError } from './errors.js'
import { exactly, isNonEmptyString, nullable, plainStateSchema } from './plain-check.js'
import { isCount, isObject, unwrapWholeLine } from './shapes.js'

export const SESSION_TITLE_KEY = 'sessionTitle'
/** Moves whenever the fold or the state changes (a checkpoint row of another version is ignored). */
export const SESSION_TITLE_STATE_VERSION = 1
/** The event a driver writes to set a title; the last one wins over the first prompt. */
export const SESSION_TITLE_EVENT = 'session/title'
/** Titles are capped at this many graphemes (an ellipsis ends a cut title). */
export const TITLE_MAX_LENGTH = 80

export interface SessionTitleEventData {
  readonly title: string
}

/** A title and where it came from. */
export interface SessionTitle {
  readonly title: string
  /** `event`: a `session/title` event; `prompt`: the first user message. */
  readonly source: 'event' | 'prompt'
  /** The seq of the event the title was taken from. */
  readonly seq: number
  /** True when the title comes from the inherited prefix (a fork with no title of its own yet). */
  readonly inherited: boolean
}

interface Candidate {
  readonly title: string
  readonly seq: number
}

export interface SessionTitleState {
  readonly from: number
  readonly ownEvent: Candidate | null
  readonly ownPrompt: Candidate | null
  readonly inheritedEvent: Candidate | null
  readonly inheritedPrompt: Candidate | null
  /** `session/title` events without a usable title, and user messages without string text. */
  readonly skipped: number
}

declare module '@dsh/session-projection' {
  interface SessionProjectionStateMap {
    sessionTitle: SessionTitleState
  }
  interface SessionProjectionMap {
    sessionTitle: SessionTitle | null
  }
}

// Terminal escape sequences (CSI, OSC, two-byte ESC forms, 8-bit CSI), removed whole.
const ESCAPES = new RegExp(
  [
    '\\u001b\\[[0-?]*[ -/]*[@-~]',
    '\\u001b\\][^\\u0007\\u001b]*(?:\\u0007|\\u001b\\\\)?',
    '\\u001b[@-Z\\\\-_]?',
    '\\u009b[0-?]*[ -/]*[@-~]',
  ].join('|'),
  'g',
)
// Other control characters read as a space (a newline separates words).
const CONTROLS = /\p{Cc}/gu
// Bidirectional controls and invisible formatting that could reorder or hide what a listing shows.
const INVISIBLE = /[\u061c\u200b\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]/g
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g
/**
 * Made on first use: a grapheme segmenter loads ICU's break data (tens of ms),
 * which a command that only views cached titles (`dsh sessions`) never needs.
 */
let segmenter: Intl.Segmenter | undefined

function graphemesOf(text: string): string[] {
  segmenter ??= new Intl.Segmenter('und', { granularity: 'grapheme' })
  return Array.from(segmenter.segment(text), (segment) => segment.segment)
}

function clean(text: string): string {
  return text
    .replace(LONE_SURROGATE, '\ufffd')
    .replace(ESCAPES, '')
    .replace(INVISIBLE, '')
    .replace(CONTROLS, ' ')
    .replace(/\s+/gu, ' ')
    .trim()
}

/** Graphemes a cut prefix must hold beyond `maxLength` so that what was cut at its end (half an escape sequence) is never kept. */
const CUT_MARGIN = 8

/**
 * A title fit for one line of a listing: terminal escapes and bidi/invisible
 * controls removed, other controls and every run of whitespace collapsed to
 * one space, trimmed, lone surrogates replaced, and capped at `maxLength`
 * graphemes (a cut title ends in `…`, never inside a grapheme). May be empty.
 * The work is bounded by the title, not the text: a prefix is cleaned, grown
 * only while it holds too few graphemes, so a prompt of megabytes costs what
 * a short one does.
 */
export function normalizeTitle(text: string, maxLength = TITLE_MAX_LENGTH): string {
  for (let end = Math.min(text.length, 16 * (maxLength + CUT_MARGIN)); ; end = Math.min(text.length, end * 4)) {
    const whole = end >= text.length
    const cleaned = clean(whole ? text : text.slice(0, end))
    if (whole && cleaned.length <= maxLength) return cleaned
    const graphemes = graphemesOf(cleaned)
    if (whole && graphemes.length <= maxLength) return cleaned
    if (whole || graphemes.length > maxLength + CUT_MARGIN) {
      return `${graphemes
        .slice(0, Math.max(0, maxLength - 1))
        .join('')
        .trimEnd()}…`
    }
  }
}

/**
 * Writes a driver's title as a `session/title` event, normalized. Throws
 * `SESSION_STATS_INVALID_TITLE` when `title` is not a string or is empty once
 * normalized (nothing is appended).
 */
export function appendSessionTitle(session: Session, title: string): StoredSessionEvent {
  const normalized = typeof title === 'string' ? normalizeTitle(title) : ''
  if (normalized === '') {
    throw new SessionStatsError(
      'SESSION_STATS_INVALID_TITLE',
      `Cannot title session '${session.id}': the title ${typeof title === 'string' ? 'is empty once control characters and whitespace are removed' : 'is not a string'}.`,
      { details: { session: session.id } },
    )
  }
  const data: SessionTitleEventData = { title: normalized }
  return session.append(SESSION_TITLE_EVENT, data)
}

function titleIn(data: unknown, field: 'text' | 'title'): string | undefined {
  if (!isObject(data)) return undefined
  const value = data[field]
  return typeof value === 'string' ? normalizeTitle(value) : undefined
}

function apply(state: SessionTitleState, event: StoredSessionEvent): SessionTitleState {
  if (event.type === 'v0/event') {
    const inner = unwrapWholeLine(event)
    return inner === undefined ? state : apply(state, inner)
  }
  const own = event.seq >= state.from
  if (event.type === SESSION_TITLE_EVENT) {
    const title = titleIn(event.data, 'title')
    if (title === undefined || title === '') return { ...state, skipped: state.skipped + 1 }
    return own ? { ...state, ownEvent: { title, seq: event.seq } } : { ...state, inheritedEvent: { title, seq: event.seq } }
  }
  if (event.type === 'user/message') {
    if ((own ? state.ownPrompt : state.inheritedPrompt) !== null) return state
    const title = titleIn(event.data, 'text')
    if (title === undefined) return { ...state, skipped: state.skipped + 1 }
    // An empty prompt has no title: a later one may.
    if (title === '') return state
    return own ? { ...state, ownPrompt: { title, seq: event.seq } } : { ...state, inheritedPrompt: { title, seq: event.seq } }
  }
  return state
}

function view(state: SessionTitleState): SessionTitle | null {
  const pick = (candidate: Candidate | null, source: SessionTitle['source'], inherited: boolean): SessionTitle | null =>
    candidate === null ? null : { title: candidate.title, source, seq: candidate.seq, inherited }
  return (
    pick(state.ownEvent, 'event', false) ??
    pick(state.ownPrompt, 'prompt', false) ??
    pick(state.inheritedEvent, 'event', true) ??
    pick(state.inheritedPrompt, 'prompt', true)
  )
}

const candidate = nullable(exactly({ title: isNonEmptyString, seq: isCount }))
/** The checkpoint schema, a plain check (`plain-check.ts`): a listing checks a row per session and loads no schema library for it. */
const stateSchema = plainStateSchema<SessionTitleState>(
  SESSION_TITLE_KEY,
  exactly({
    from: isCount,
    ownEvent: candidate,
    ownPrompt: candidate,
    inheritedEvent: candidate,
    inheritedPrompt: candidate,
    skipped: isCount,
  }),
)

/**
 * The `sessionTitle` unit: a session's own title first (its last
 * `session/title` event, else its first user prompt), else the one it
 * inherited (a fork before its own first prompt). No model is called.
 */
export const sessionTitleUnit: SessionProjectionUnit<'sessionTitle'> = Object.freeze({
  key: SESSION_TITLE_KEY,
  stateVersion: SESSION_TITLE_STATE_VERSION,
  init: (context?: ProjectionInitContext): SessionTitleState => ({
    from: context?.inheritedEventCount ?? 0,
    ownEvent: null,
    ownPrompt: null,
    inheritedEvent: null,
    inheritedPrompt: null,
    skipped: 0,
  }),
  apply,
  view,
  schema: stateSchema,
})
