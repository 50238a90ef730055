// The session view's transcript: the newest page first (a read costs what it
// shows), earlier pages on demand, a deep-linked event fetched and scrolled
// to, and new events merged in when the live stream says the session changed.

import { ApiFailure, api, catalogRow, seg, sessionBase } from './api.js'
import { $, fmtCost, fmtTokens, keepingFocus, showError } from './dom.js'
import { writerOf } from './live.js'
import { renderEvents } from './transcript.js'

const PAGE = 100
/** Pages the tail refresh walks back at most before it re-reads from the tail alone. */
const MAX_CATCH_UP_PAGES = 10

const view = {
  id: undefined,
  parentId: undefined,
  events: new Map(),
  nextBefore: undefined,
  generation: 0,
  timer: undefined,
  busy: false,
  again: false,
}

const history = (before, limit) =>
  api(
    `${sessionBase(view.id, view.parentId)}/history?${new URLSearchParams({ limit: String(limit), ...(before === undefined ? {} : { before: String(before) }) })}`,
  )

function openDetails(list) {
  const open = new Set()
  for (const item of list.children) {
    const details = item.querySelectorAll('details')
    for (let i = 0; i < details.length; i++) if (details[i].open) open.add(`${item.dataset.seq}:${i}`)
  }
  return open
}

function render() {
  const list = $('transcript')
  const open = openDetails(list)
  const events = [...view.events.values()].sort((a, b) => a.seq - b.seq)
  const items = renderEvents(events, { id: view.id, parentId: view.parentId })
  for (const item of items) {
    const details = item.querySelectorAll('details')
    for (let i = 0; i < details.length; i++) if (open.has(`${item.dataset.seq}:${i}`)) details[i].open = true
  }
  keepingFocus(list, () => list.replaceChildren(...items))
  const last = events.at(-1)
  list.setAttribute('data-last-seq', last === undefined ? '-1' : String(last.seq))
  list.setAttribute('data-count', String(events.length))
  $('earlier').hidden = view.nextBefore === undefined
  $('transcript-empty').hidden = events.length > 0
}

function merge(page) {
  for (const event of page.events) view.events.set(event.seq, event)
}

const header = { id: undefined, parentId: undefined, live: undefined, generation: 0 }

/** The session view's heading and facts (title, state, tokens, cost) for `id`, whichever view is open. */
export async function showHeader(id, parentId) {
  if (id === header.id && parentId === header.parentId) return
  header.id = id
  header.parentId = parentId
  header.live = undefined
  const generation = ++header.generation
  $('session-title').textContent = id
  $('meta-id').textContent = id
  $('meta-parent-row').hidden = parentId === undefined
  $('meta-parent').textContent = parentId ?? ''
  $('meta-parent').href = parentId === undefined ? '#list' : `#${new URLSearchParams({ session: parentId })}`
  for (const field of ['meta-state', 'meta-tokens', 'meta-cost']) $(field).textContent = '…'
  try {
    const facts = parentId === undefined ? await ownFacts(id) : await childFacts(parentId, id)
    if (generation !== header.generation) return
    $('session-title').textContent = facts.title ?? '(untitled)'
    $('meta-tokens').textContent = fmtTokens(facts.tokens)
    $('meta-cost').textContent = fmtCost(facts.cost)
    $('meta-cost').title = facts.priced ? '' : 'No price table on this server.'
    header.live = facts.live
    showState()
  } catch (error) {
    if (generation === header.generation) $('meta-state').textContent = `unknown (${error.code ?? error.message})`
  }
}

/** A top-level session's heading facts: its stats report. */
async function ownFacts(id) {
  const report = await api(`/api/sessions/${seg(id)}/stats`)
  const entry = report.sessions[0]
  return {
    title: report.title,
    tokens: entry?.tokens ?? null,
    cost: report.cost?.usd ?? null,
    priced: report.cost !== null,
    live: entry?.rung === 1,
  }
}

/** A subagent's heading facts: its row in its parent's catalog (named by its label; `cost` only on a priced server). */
async function childFacts(parentId, id) {
  const row = await catalogRow(parentId, id)
  if (row === undefined) throw new ApiFailure(404, { code: 'API_NOT_FOUND', message: `Session '${parentId}' lists no subagent '${id}'.` })
  return {
    title: row.label ?? null,
    tokens: row.tokens ?? null,
    cost: row.cost ?? null,
    priced: row.cost !== undefined,
    live: row.rung === 1,
  }
}

/** The session's state: live in this server, being written by another process (its writer lock and the change feed say so), or at rest. */
export function showState() {
  if (header.id === undefined || header.live === undefined) return
  const writer = writerOf(header.id)
  const [text, state] =
    writer === 'other-process'
      ? ['being written by another process', 'being-written']
      : header.live || writer === 'this-process'
        ? ['live in this server', 'live']
        : ['at rest', 'at-rest']
  $('meta-state').textContent = text
  $('meta-state').setAttribute('data-state', state)
}

/** Forgets the heading, so the next `showHeader` reads it again. */
export function resetHeader() {
  header.id = undefined
  header.generation++
}

/** Shows session `id` (a subagent through `parentId`), scrolled to event `seq` when given. */
export async function openSession(id, parentId, seq) {
  const same = id === view.id && parentId === view.parentId
  if (!same) {
    view.id = id
    view.parentId = parentId
    view.events = new Map()
    view.nextBefore = undefined
    $('transcript').replaceChildren()
  }
  const generation = ++view.generation
  try {
    if (!same) {
      const page = await history(undefined, PAGE)
      if (generation !== view.generation) return
      merge(page)
      view.nextBefore = page.nextBefore
    }
    if (seq !== undefined) await reach(seq, generation)
    if (generation !== view.generation) return
    showError('transcript-error', undefined)
    render()
    if (seq !== undefined) focusEvent(seq)
  } catch (error) {
    if (generation === view.generation) showError('transcript-error', error)
  }
}

/** Fetches earlier pages until event `seq` is loaded (or the log's start). */
async function reach(seq, generation) {
  while (!view.events.has(seq) && view.nextBefore !== undefined && seq < view.nextBefore && generation === view.generation) {
    const limit = Math.min(1000, Math.max(PAGE, view.nextBefore - seq))
    const page = await history(view.nextBefore, limit)
    merge(page)
    view.nextBefore = page.nextBefore
  }
}

function focusEvent(seq) {
  for (const old of document.querySelectorAll('.event.target')) old.classList.remove('target')
  const item = document.getElementById(`ev-${seq}`)
  if (item === null) return
  item.classList.add('target')
  item.tabIndex = -1
  item.focus({ preventScroll: true })
  item.scrollIntoView({ block: 'center' })
}

async function loadEarlier() {
  if (view.nextBefore === undefined) return
  const generation = view.generation
  try {
    const page = await history(view.nextBefore, PAGE)
    if (generation !== view.generation) return
    merge(page)
    view.nextBefore = page.nextBefore
    render()
  } catch (error) {
    showError('transcript-error', error)
  }
}

/** New events since the last one shown: the tail page, and earlier pages back to what is shown when many arrived at once. */
async function refreshTail() {
  if (view.id === undefined) return
  if (view.busy) {
    view.again = true
    return
  }
  view.busy = true
  const generation = view.generation
  try {
    const known = Math.max(-1, ...view.events.keys())
    let page = await history(undefined, PAGE)
    if (generation !== view.generation) return
    merge(page)
    for (let i = 0; i < MAX_CATCH_UP_PAGES && page.nextBefore !== undefined && page.events[0]?.seq > known + 1; i++) {
      page = await history(page.events[0].seq, PAGE)
      if (generation !== view.generation) return
      merge(page)
    }
    showError('transcript-error', undefined)
    render()
  } catch (error) {
    if (generation === view.generation) showError('transcript-error', error)
  } finally {
    view.busy = false
    if (view.again) {
      view.again = false
      scheduleTail()
    }
  }
}

/** Coalesces bursts of change notices into one tail read. */
export function scheduleTail() {
  clearTimeout(view.timer)
  view.timer = setTimeout(refreshTail, 100)
}

/** Whether a live message concerns the transcript on view. */
export function concernsTranscript(kind, data) {
  if (view.id === undefined) return false
  if (kind === 'ready') return true
  if (kind === 'written') return data.id === view.id
  if (kind === 'projection') return view.parentId === undefined && data.sessionId === view.id
  return kind === 'catalog' && data.childId === view.id
}

export function closeSession() {
  view.id = undefined
  view.generation++
}

export function initSession() {
  $('earlier').addEventListener('click', loadEarlier)
}
