// The dsh catalog page: plain ES modules served as-is by @dsh/apiproxy (no
// build step, no external resources). Everything it shows comes from the
// JSON API and reaches the DOM as text nodes, so ids and text can hold
// anything. The address's hash says what is on view:
//   (empty)                       the sessions list
//   #session=ID[&parent=P]        a session's transcript (a subagent's through its parent P)
//   …&event=N                     scrolled to event N
//   …&view=trace                  the session's subagent tree as a trace

import { $, hashLink } from './dom.js'
import { initList, loadSessions } from './list.js'
import { follow, onLive } from './live.js'
import { closeSession, concernsTranscript, initSession, openSession, resetHeader, scheduleTail, showHeader, showState } from './session.js'
import { closeTrace, openTrace, scheduleTrace } from './trace.js'

let current = {}

/** When the page shows the list or another session, the keyboard continues from that view's heading. */
function focusHeading(previous) {
  const heading = $(current.id === undefined ? 'sessions-title' : 'session-title')
  if (previous.id === current.id && previous.parentId === current.parentId) return
  heading.tabIndex = -1
  heading.focus({ preventScroll: true })
}

function route() {
  const previous = current
  const params = new URLSearchParams(location.hash.slice(1))
  const id = params.get('session') ?? undefined
  const parentId = params.get('parent') ?? undefined
  const eventText = params.get('event')
  const seq = eventText !== null && /^\d+$/.test(eventText) ? Number(eventText) : undefined
  const trace = params.get('view') === 'trace'
  current = { id, parentId, trace }
  $('list-view').hidden = id !== undefined
  $('session-view').hidden = id === undefined
  if (id === undefined) {
    closeSession()
    closeTrace()
    resetHeader()
    follow(undefined)
    document.title = 'dsh sessions'
    return previous
  }
  document.title = `dsh · ${id}`
  showHeader(id, parentId)
  $('tab-transcript').href = hashLink({ session: id, parent: parentId })
  $('tab-trace').href = hashLink({ session: id, parent: parentId, view: 'trace' })
  $('tab-transcript').setAttribute('aria-current', trace ? 'false' : 'page')
  $('tab-trace').setAttribute('aria-current', trace ? 'page' : 'false')
  $('transcript-pane').hidden = trace
  $('trace-pane').hidden = !trace
  // A subagent's changes reach its parent's stream as catalog notices; a tree's reach its root's.
  follow(trace ? id : (parentId ?? id))
  if (trace) {
    closeSession()
    openTrace(id, parentId)
  } else {
    closeTrace()
    openSession(id, parentId, seq)
  }
  return previous
}

onLive((kind, data) => {
  if (current.id === undefined) return
  if (kind === 'written') showState()
  if (current.trace) {
    if (kind === 'ready' || kind === 'catalog' || kind === 'written') scheduleTrace()
  } else if (concernsTranscript(kind, data)) scheduleTail()
})

initList()
initSession()
window.addEventListener('hashchange', () => focusHeading(route()))
loadSessions(true)
route()
