// The dsh catalog page: plain browser JavaScript served as-is by @dsh/apiproxy
// (no build step, no external resources). Everything it shows comes from the
// JSON API; it renders with textContent only, so ids and labels can hold any text.

const token = new URLSearchParams(location.search).get('token') ?? ''
const $ = (id) => document.getElementById(id)

const state = {
  selected: undefined,
  cursor: undefined,
  source: undefined,
  refreshTimer: undefined,
  treeGeneration: 0,
}

class ApiFailure extends Error {
  constructor(status, body) {
    super(body?.message ?? `HTTP ${status}`)
    this.status = status
    this.code = body?.code ?? 'API_UNKNOWN'
  }
}

async function api(path) {
  const response = await fetch(path, { headers: { Authorization: `Bearer ${token}`, Accept: 'application/json' } })
  const body = await response.json().catch(() => undefined)
  if (!response.ok) throw new ApiFailure(response.status, body)
  return body
}

const seg = (id) => encodeURIComponent(id)

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag)
  for (const [key, value] of Object.entries(props)) {
    if (key === 'class') node.className = value
    else if (key === 'text') node.textContent = value
    else if (key.startsWith('data-')) node.setAttribute(key, value)
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value)
    else node.setAttribute(key, value)
  }
  for (const child of children) if (child !== undefined && child !== null) node.append(child)
  return node
}

function showError(id, error) {
  const node = $(id)
  if (error === undefined) {
    node.hidden = true
    node.textContent = ''
  } else {
    node.hidden = false
    node.textContent = error instanceof ApiFailure ? `${error.code}: ${error.message}` : String(error?.message ?? error)
  }
}

// ---- session list -------------------------------------------------------

async function loadSessions(reset) {
  if (reset) {
    state.cursor = undefined
    $('sessions').tBodies[0].replaceChildren()
  }
  const params = new URLSearchParams({ limit: '100' })
  if (state.cursor !== undefined) params.set('cursor', state.cursor)
  try {
    const page = await api(`/api/sessions?${params}`)
    showError('sessions-error', undefined)
    const hide = $('hide-subagents').checked
    const body = $('sessions').tBodies[0]
    for (const record of page.sessions) {
      const header = record.header
      if (hide && header.origin === 'subagent') continue
      const row = el(
        'tr',
        { 'data-session-id': header.id, onclick: () => select(header.id) },
        el('td', { class: 'id', text: header.id }),
        // Blank until the server knows it without reading the log (a later fold fills it); textContent, never markup.
        el('td', { class: 'title', text: record.title ?? '' }),
        el('td', { text: new Date(header.createdAt).toLocaleString() }),
        el('td', {
          text:
            header.origin === 'subagent'
              ? `subagent of ${header.parentSession}`
              : header.parentSession
                ? `fork of ${header.parentSession}`
                : 'top level',
        }),
        el('td', { text: record.live ? 'live' : 'cold' }),
        el('td', { class: 'tokens', text: record.tokens === null ? '' : String(record.tokens) }),
      )
      if (header.id === state.selected) row.classList.add('selected')
      body.append(row)
    }
    state.cursor = page.nextCursor
    $('more-sessions').hidden = page.nextCursor === undefined
  } catch (error) {
    showError('sessions-error', error)
  }
}

// ---- subagent tree ------------------------------------------------------

const RUNGS = { 1: 'the live watermark (no log read)', 2: 'the checkpoint cache (no log read)', 3: 'one cold read of the log' }
const REASONS = {
  corrupt: 'settled, but its log has no valid subagent descriptor',
  unavailable: 'its log could not be read this time; listing again retries',
  unsupported: 'an unsupported descriptor',
}

function rowNode(row) {
  const attrs = {
    'data-row-id': row.id,
    'data-kind': row.kind,
    'data-depth': String(row.depth),
    'data-parent-id': row.parentId,
    'data-rung': String(row.rung),
  }
  if (row.kind === 'diagnostic') {
    return el(
      'li',
      { ...attrs, 'data-reason': row.reason },
      el(
        'div',
        { class: 'row', title: `Diagnostic: ${REASONS[row.reason] ?? row.reason}. Decided by ${RUNGS[row.rung] ?? `rung ${row.rung}`}.` },
        el('span', { class: 'badge diagnostic', text: row.reason }),
        el('span', { class: 'row-id', text: row.id }),
      ),
    )
  }
  const label =
    row.label === undefined ? el('span', { class: 'label none', text: '(no label)' }) : el('span', { class: 'label', text: row.label })
  return el(
    'li',
    { ...attrs, 'data-activity': row.activity, 'data-mode': row.mode },
    el(
      'div',
      {
        class: 'row',
        title: `Show history. Identity from ${RUNGS[row.rung] ?? `rung ${row.rung}`}.`,
        onclick: () => showHistory(row.parentId, row.id),
      },
      label,
      el('span', { class: 'badge mode', text: row.mode }),
      el('span', { class: `badge activity ${row.activity}`, text: row.activity }),
      el('span', { class: 'row-id', text: row.id }),
    ),
  )
}

async function loadTree() {
  const parentId = state.selected
  if (parentId === undefined) return
  const generation = ++state.treeGeneration
  try {
    const list = await api(`/api/sessions/${seg(parentId)}/subagents?scope=descendants`)
    if (generation !== state.treeGeneration) return
    showError('tree-error', undefined)
    // Rows come in pre-order with their parent's id; nest each under its parent's list.
    const lists = new Map([[parentId, $('tree')]])
    $('tree').replaceChildren()
    for (const row of list.rows) {
      const item = rowNode(row)
      let parentList = lists.get(row.parentId)
      if (parentList === undefined) parentList = $('tree')
      parentList.append(item)
      if (row.kind === 'child' && row.hasChildren) {
        const nested = el('ul')
        item.append(nested)
        lists.set(row.id, nested)
      }
    }
    $('detail-hint').textContent = list.rows.length === 0 ? 'This session has no subagents.' : ''
    $('tree').setAttribute('data-loaded', String(generation))
  } catch (error) {
    if (generation === state.treeGeneration) showError('tree-error', error)
  }
}

function scheduleTreeRefresh() {
  clearTimeout(state.refreshTimer)
  // Coalesce bursts of notices (a child finishing ends a turn and goes cold).
  state.refreshTimer = setTimeout(loadTree, 100)
}

async function showHistory(parentId, childId) {
  $('history').hidden = false
  $('history-title').textContent = childId
  const list = $('history-events')
  list.replaceChildren()
  try {
    const page = await api(`/api/sessions/${seg(parentId)}/subagents/${seg(childId)}/history?limit=50`)
    showError('history-error', undefined)
    for (const event of page.events) {
      const data = event.data
      const text = typeof data?.text === 'string' ? data.text : typeof data?.delta === 'string' ? data.delta : JSON.stringify(data)
      list.append(el('li', { value: String(event.seq + 1) }, el('span', { class: 'type', text: event.type }), text))
    }
  } catch (error) {
    showError('history-error', error)
  }
}

// ---- live stream --------------------------------------------------------

function setStatus(text, stateName) {
  $('status').textContent = text
  $('status').setAttribute('data-state', stateName)
}

function connect(sessionId) {
  state.source?.close()
  const source = new EventSource(`/api/sessions/${seg(sessionId)}/stream?token=${encodeURIComponent(token)}`)
  state.source = source
  setStatus('connecting…', 'idle')
  // `ready` also follows every automatic reconnect: refetch whatever may have been missed.
  source.addEventListener('ready', () => {
    setStatus('live', 'open')
    scheduleTreeRefresh()
  })
  source.addEventListener('catalog', scheduleTreeRefresh)
  source.addEventListener('projection', scheduleTreeRefresh)
  source.addEventListener('error', () => setStatus(source.readyState === EventSource.CLOSED ? 'disconnected' : 'reconnecting…', 'error'))
}

function select(sessionId) {
  state.selected = sessionId
  history.replaceState(null, '', `${location.pathname}${location.search}#session=${encodeURIComponent(sessionId)}`)
  for (const row of $('sessions').tBodies[0].rows) row.classList.toggle('selected', row.dataset.sessionId === sessionId)
  $('selected-session').textContent = sessionId
  $('detail-hint').textContent = 'Loading…'
  $('history').hidden = true
  $('tree').replaceChildren()
  connect(sessionId)
  loadTree()
}

$('refresh-sessions').addEventListener('click', () => loadSessions(true))
$('more-sessions').addEventListener('click', () => loadSessions(false))
$('hide-subagents').addEventListener('change', () => loadSessions(true))

const initial = new URLSearchParams(location.hash.slice(1)).get('session')
loadSessions(true)
if (initial) select(initial)
