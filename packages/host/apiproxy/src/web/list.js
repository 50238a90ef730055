// The sessions list: one cursor page at a time (never the whole corpus),
// filters by kind and state, a full-text search through the API, and each
// row's number of subagents filled in after the page shows.

import { api } from './api.js'
import { $, el, fmtCost, fmtDate, fmtTokens, hashLink, highlighted, markTerms, showError } from './dom.js'

const PAGE = 50
/** Pages fetched at most for one "more" when a client-side filter hides whole pages. */
const MAX_PAGES_PER_STEP = 5
const COUNT_CONCURRENCY = 4

const list = { cursor: undefined, done: false, generation: 0, shown: 0, counts: [], counting: 0 }

/** A row's state: in this server's memory ("live"), or only on disk ("at rest"). */
export const stateOf = (record) => (record.live ? 'live' : 'at rest')

export function sessionLink(header, extra = {}) {
  const params = { session: header.id, ...extra }
  if (header.origin === 'subagent' && header.parentSession !== undefined) params.parent = header.parentSession
  return hashLink(params)
}

function costCell(record) {
  return el('td', {
    class: 'num cost',
    text: fmtCost(record.cost),
    title: record.cost === null ? 'No price table on this server (dsh serve --prices FILE gives it one).' : undefined,
  })
}

function rowOf(record) {
  const { header } = record
  const title = record.title ?? ''
  const link = el('a', {
    href: sessionLink(header),
    class: title === '' ? 'untitled' : undefined,
    text: title === '' ? '(untitled)' : title,
  })
  const kind = header.origin === 'subagent' ? 'subagent' : header.parentSession !== undefined ? 'fork' : 'top-level'
  const children = el('td', { class: 'num children', 'data-children': 'pending', text: '…' })
  const row = el(
    'tr',
    { 'data-session-id': header.id, 'data-state': record.live ? 'live' : 'at-rest', 'data-kind': kind },
    el('td', { class: 'title' }, link, el('div', { class: 'sub mono', text: header.id })),
    el('td', { text: fmtDate(header.createdAt) }),
    el('td', {}, el('span', { class: `badge state-${record.live ? 'live' : 'rest'}`, text: stateOf(record) })),
    el('td', { class: 'num tokens', text: fmtTokens(record.tokens) }),
    costCell(record),
    children,
  )
  list.counts.push({ id: header.id, cell: children, generation: list.generation })
  return row
}

function filters() {
  return { kind: $('filter-kind').value, state: $('filter-state').value }
}

function visible(record, { kind, state }) {
  if (kind === 'top' && record.header.origin === 'subagent') return false
  if (state === 'live' && !record.live) return false
  if (state === 'at-rest' && record.live) return false
  return true
}

/**
 * Loads the next page (or the first, with `reset`), fetching on while a
 * client-side filter hides everything fetched; answers the first row added.
 */
export async function loadSessions(reset) {
  let first
  const generation = reset ? ++list.generation : list.generation
  const body = $('sessions').tBodies[0]
  if (reset) {
    list.cursor = undefined
    list.done = false
    list.shown = 0
    list.counts = []
    body.replaceChildren()
  }
  const chosen = filters()
  $('more-sessions').disabled = true
  try {
    for (let step = 0; step < MAX_PAGES_PER_STEP && !list.done; step++) {
      const params = new URLSearchParams({ limit: String(PAGE) })
      if (chosen.kind === 'subagent') params.set('origin', 'subagent')
      if (list.cursor !== undefined) params.set('cursor', list.cursor)
      const page = await api(`/api/sessions?${params}`)
      if (generation !== list.generation) return
      let added = 0
      for (const record of page.sessions) {
        if (!visible(record, chosen)) continue
        const row = rowOf(record)
        first ??= row
        body.append(row)
        added++
      }
      list.shown += added
      list.cursor = page.nextCursor
      list.done = page.nextCursor === undefined
      if (added > 0) break
    }
    showError('sessions-error', undefined)
    $('sessions').setAttribute('data-loaded', String(generation))
    $('list-info').textContent =
      list.shown === 0 ? 'No sessions match.' : `${list.shown} shown${list.done ? '' : '; more on the next page'}.`
    // The rows paint first; their subagent counts follow.
    requestAnimationFrame(countChildren)
  } catch (error) {
    if (generation === list.generation) showError('sessions-error', error)
  } finally {
    $('more-sessions').disabled = false
    $('more-sessions').hidden = list.done
  }
  return first
}

/** The next page; the keyboard continues from its first row, since the button may be gone. */
async function moreSessions() {
  const button = $('more-sessions')
  const pressed = document.activeElement === button
  const first = await loadSessions(false)
  // A disabled or hidden button loses focus to the body; focus the user moved elsewhere meanwhile stays.
  const idle = document.activeElement === button || document.activeElement === document.body
  if (first !== undefined && pressed && idle) first.querySelector('a')?.focus()
}

// Each row's subagents: one header-only listing of its children (indexed by parent), a few at a time.
function countChildren() {
  while (list.counting < COUNT_CONCURRENCY && list.counts.length > 0) {
    const job = list.counts.shift()
    if (job.generation !== list.generation) continue
    list.counting++
    api(`/api/sessions?${new URLSearchParams({ parentSession: job.id, origin: 'subagent', limit: '100' })}`)
      .then((page) => {
        job.cell.textContent = `${page.sessions.length}${page.nextCursor === undefined ? '' : '+'}`
        job.cell.setAttribute('data-children', String(page.sessions.length))
      })
      .catch(() => {
        job.cell.textContent = '?'
        job.cell.setAttribute('data-children', 'unavailable')
        job.cell.title = 'The children could not be listed now.'
      })
      .finally(() => {
        list.counting--
        countChildren()
      })
  }
}

// ---- search -----------------------------------------------------------------

let searchGeneration = 0

function terms(text) {
  return [...new Set(text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [])]
}

/** Full-text search through the API: matching sessions (with their parents) and matching events with highlighted snippets. */
export async function search(text) {
  const generation = ++searchGeneration
  const results = $('search-results')
  const hits = $('search-hits')
  if (text.trim() === '') {
    results.hidden = true
    hits.replaceChildren()
    return
  }
  results.hidden = false
  $('search-summary').textContent = 'Searching…'
  try {
    const q = encodeURIComponent(text)
    const [sessions, events] = await Promise.all([
      api(`/api/search?q=${q}&kind=sessions&limit=50`),
      api(`/api/search?q=${q}&kind=events&limit=50`),
    ])
    if (generation !== searchGeneration) return
    showError('search-error', undefined)
    const headers = new Map(sessions.hits.map((hit) => [hit.record.header.id, hit.record.header]))
    const wanted = terms(text)
    hits.replaceChildren()
    for (const hit of events.hits) {
      const header = headers.get(hit.id) ?? { id: hit.id }
      hits.append(
        el(
          'li',
          { 'data-hit-session': hit.id, 'data-hit-seq': String(hit.seq) },
          el('a', { href: sessionLink(header, { event: hit.seq }) }, ...markTerms(hit.id, wanted)),
          el('span', { class: 'badge', text: hit.type }),
          el('span', { class: 'snippet' }, ...highlighted(hit.snippet, hit.marks)),
        ),
      )
    }
    $('search-summary').textContent =
      events.hits.length === 0
        ? 'No event matches.'
        : `${events.hits.length}${events.nextCursor === undefined ? '' : '+'} matching events in ${headers.size} sessions.`
  } catch (error) {
    if (generation === searchGeneration) {
      $('search-summary').textContent = ''
      showError('search-error', error)
    }
  }
}

export function initList() {
  $('filter-kind').addEventListener('change', () => loadSessions(true))
  $('filter-state').addEventListener('change', () => loadSessions(true))
  $('more-sessions').addEventListener('click', moreSessions)
  $('search-form').addEventListener('submit', (event) => {
    event.preventDefault()
    search($('search').value)
  })
  $('search-clear').addEventListener('click', () => {
    $('search').value = ''
    search('')
  })
}
