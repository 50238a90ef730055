// The trace view: a session's subagent tree as nested spans, each with its
// own tokens and time and the sums over its subtree, on a waterfall. A child
// runs from its row's `startedAt` to its `endedAt` (the timing unit's span:
// its descriptor to its latest turn start or end; a running child runs until
// now); a row without a span runs from its session's creation for its turn
// time. Rows the catalog could not read say why. The catalog stream's notices reload it, so running children
// change state on the page without a reload.

import { api, catalogRow, seg, sessionBase } from './api.js'
import { $, el, fmtCost, fmtMs, fmtTokens, hashLink, keepingFocus, showError } from './dom.js'
import { writerOf } from './live.js'

const REASONS = {
  corrupt: 'its log holds no valid subagent descriptor',
  unavailable: 'its log could not be read this time; the view retries on the next change',
  unsupported: 'its descriptor is of an unsupported kind',
}
const RUNGS = { 1: 'live in this server', 2: 'from the checkpoint cache', 3: 'from one read of its log' }

const trace = { id: undefined, parentId: undefined, generation: 0, timer: undefined }

/** Headers (creation time, liveness) of every child of `ids`, one indexed listing per parent. */
async function childRecords(ids) {
  const records = new Map()
  await Promise.all(
    ids.map(async (id) => {
      let cursor
      do {
        const params = new URLSearchParams({ parentSession: id, limit: '1000', ...(cursor === undefined ? {} : { cursor }) })
        const page = await api(`/api/sessions?${params}`)
        for (const record of page.sessions) records.set(record.header.id, record)
        cursor = page.nextCursor
      } while (cursor !== undefined)
    }),
  )
  return records
}

function spanNode(node, scale) {
  const { row, entry } = node
  const diagnostic = row?.kind === 'diagnostic'
  const problem = entry?.problem
  const name = row === undefined ? (entry?.title ?? node.id) : (row.label ?? entry?.title ?? '(no label)')
  const link = el('a', { href: node.href, class: 'span-name', text: name })
  const rung = row?.rung ?? entry?.rung
  const writer = writerOf(node.id) ?? (rung === 1 ? 'this-process' : 'none')
  const badges = [
    row?.mode ? el('span', { class: 'badge mode', text: row.mode }) : undefined,
    row?.activity ? el('span', { class: `badge activity ${row.activity}`, text: row.activity }) : undefined,
    diagnostic ? el('span', { class: 'badge diagnostic', text: row.reason }) : undefined,
    writer === 'other-process' ? el('span', { class: 'badge running', text: 'being written' }) : undefined,
  ]
  const why =
    diagnostic || (entry !== undefined && entry.status !== 'ok')
      ? el('p', {
          class: 'why error',
          // The code names the fault; the message stays in the server's log and `dsh verify` (it may name files).
          text: `${diagnostic ? `${REASONS[row.reason] ?? row.reason}.` : `${entry.status}.`}${problem?.code ? ` (${problem.code})` : ''}`,
        })
      : undefined
  const running = row?.activity === 'running' || writer === 'other-process'
  const bar = el('div', { class: `bar ${running ? 'running' : diagnostic ? 'diagnostic' : ''}`, 'aria-hidden': 'true' })
  if (node.start !== undefined && scale.span > 0) {
    bar.style.marginLeft = `${(100 * (node.start - scale.t0)) / scale.span}%`
    bar.style.width = `${Math.max(0.5, (100 * (node.end - node.start)) / scale.span)}%`
  } else bar.classList.add('unknown')
  const item = el(
    'li',
    {
      'data-span-id': node.id,
      'data-kind': row?.kind ?? 'session',
      'data-activity': row?.activity,
      'data-reason': row?.reason,
      'data-depth': String(node.depth),
      'data-status': entry?.status,
      'data-writer': writer,
      'data-start': node.start === undefined ? undefined : String(node.start),
      'data-end': node.end === undefined ? undefined : String(node.end),
      title: `Values ${RUNGS[rung] ?? 'unknown'}.`,
    },
    el(
      'div',
      { class: 'span' },
      el('div', { class: 'span-label' }, link, ...badges, el('div', { class: 'sub mono', text: node.id })),
      el('div', { class: 'span-bar' }, bar),
      el('div', { class: 'num span-tokens', 'data-tokens': String(node.tokens ?? ''), text: fmtTokens(node.tokens) }),
      el('div', { class: 'num span-rollup', 'data-tokens': String(node.rollup), text: fmtTokens(node.rollup) }),
      el('div', { class: 'num span-time', text: fmtMs(node.ms) }),
      el('div', { class: 'num span-cost', 'data-cost': String(node.cost ?? ''), text: fmtCost(node.cost), title: node.costWhy }),
      el('div', {
        class: 'num span-cost-rollup',
        'data-cost': node.costRollup.known ? String(node.costRollup.usd) : '',
        'data-partial': String(node.costRollup.partial),
        // Summed over the known costs, as tokens are; an unknown one in the subtree makes it a lower bound.
        text: node.costRollup.known ? `${node.costRollup.partial ? '≥ ' : ''}${fmtCost(node.costRollup.usd)}` : fmtCost(null),
        title: node.costRollup.partial ? 'Some costs in this subtree are unknown, so this is a lower bound.' : undefined,
      }),
    ),
    why,
  )
  return item
}

/** Loads and draws the tree under `id` (a subagent's through `parentId`). */
async function load() {
  const { id } = trace
  if (id === undefined) return
  const generation = ++trace.generation
  try {
    const parentId = trace.parentId
    const [catalog, stats, tail, own] = await Promise.all([
      api(`/api/sessions/${seg(id)}/subagents?scope=descendants`),
      // A subagent's stats are served only through its parent: its trace sums its catalog rows instead.
      parentId === undefined ? api(`/api/sessions/${seg(id)}/stats?scope=descendants`) : undefined,
      api(`${sessionBase(id, parentId)}/history?limit=1`),
      // The root's own values: a top-level session's own stats (the tree's are the summary's), a subagent's row in its parent's catalog.
      parentId === undefined ? api(`/api/sessions/${seg(id)}/stats`) : catalogRow(parentId, id),
    ])
    const parents = [id, ...catalog.rows.filter((row) => row.kind === 'child' && row.hasChildren).map((row) => row.id)]
    const records = await childRecords(parents)
    if (generation !== trace.generation) return
    draw(catalog, stats, tail, records, parentId === undefined ? { own } : { row: own })
    showError('trace-error', undefined)
    $('trace').setAttribute('data-loaded', String(generation))
  } catch (error) {
    if (generation === trace.generation) showError('trace-error', error)
  }
}

/** A span's own cost and why it is unknown: a row carries `cost` only from a server with a price table. */
function costOf(row, own) {
  if (row === undefined && own === undefined) return { cost: null, costWhy: 'Its parent does not list it yet.' }
  if (row === undefined)
    return own.costReason === 'no-price-table'
      ? { cost: null, costWhy: 'No price table on this server (dsh serve --prices FILE gives it one).' }
      : { cost: own.cost?.usd ?? null, costWhy: own.cost?.usd === null ? `Not priced: ${own.cost.reason}.` : undefined }
  if (row.cost === undefined) return { cost: null, costWhy: 'No price table on this server (dsh serve --prices FILE gives it one).' }
  return { cost: row.cost, costWhy: row.cost === null ? 'Its usage is unknown or a model it used has no price.' : undefined }
}

/**
 * Draws the tree. `stats` is the root's tree report (absent for a subagent,
 * whose sums come from the rows); the root's own values are `own` (its own
 * stats report) or `row` (a subagent's row in its parent's catalog).
 */
function draw(catalog, stats, tail, records, { own, row: rootRow }) {
  const now = Date.now()
  const entries = new Map((stats?.sessions ?? []).map((entry) => [entry.id, entry]))
  const rootEntry = entries.get(trace.id)
  const lastTime = tail.events.at(-1)?.time
  const live = (rootRow?.rung ?? rootEntry?.rung) === 1
  const root = {
    id: trace.id,
    depth: 0,
    row: rootRow,
    entry: rootEntry,
    href: hashLink({ session: trace.id, parent: trace.parentId }),
    start: tail.header.createdAt,
    end: Math.max(tail.header.createdAt, live ? now : (lastTime ?? tail.header.createdAt)),
    tokens: rootRow?.tokens ?? rootEntry?.tokens ?? null,
    ms: rootRow?.durationMs ?? rootEntry?.turnMs ?? null,
    ...costOf(rootRow, own),
    children: [],
  }
  const nodes = new Map([[trace.id, root]])
  for (const row of catalog.rows) {
    const record = records.get(row.id)
    const entry = entries.get(row.id)
    const spanned = typeof row.startedAt === 'number' && typeof row.endedAt === 'number'
    const start = spanned ? row.startedAt : record?.header.createdAt
    const ms = row.durationMs ?? entry?.turnMs ?? null
    const settledEnd = spanned ? row.endedAt : start + (ms ?? 0)
    const node = {
      id: row.id,
      depth: row.depth,
      row,
      entry,
      record,
      href: hashLink({ session: row.id, parent: row.parentId }),
      start,
      // A child another process is writing runs until now, whatever this server's catalog can see of it.
      end:
        start === undefined
          ? undefined
          : row.activity === 'running' || writerOf(row.id) === 'other-process'
            ? Math.max(now, settledEnd)
            : settledEnd,
      tokens: row.tokens ?? entry?.tokens ?? null,
      ms,
      ...costOf(row, own),
      children: [],
    }
    nodes.set(row.id, node)
    ;(nodes.get(row.parentId) ?? root).children.push(node)
  }
  const rollup = (node) => (node.rollup = (node.tokens ?? 0) + node.children.reduce((n, child) => n + rollup(child), 0))
  rollup(root)
  const rollupCost = (node) => {
    const sums = node.children.map(rollupCost)
    node.costRollup = {
      usd: (node.cost ?? 0) + sums.reduce((usd, sum) => usd + sum.usd, 0),
      partial: node.cost === null || sums.some((sum) => sum.partial),
      known: node.cost !== null || sums.some((sum) => sum.known),
    }
    return node.costRollup
  }
  rollupCost(root)
  let t0 = Infinity
  let t1 = -Infinity
  for (const node of nodes.values())
    if (node.start !== undefined) {
      t0 = Math.min(t0, node.start)
      t1 = Math.max(t1, node.end)
    }
  const scale = { t0, span: Number.isFinite(t1 - t0) ? Math.max(1, t1 - t0) : 0 }
  const build = (node) => {
    const item = spanNode(node, scale)
    if (node.children.length > 0) item.append(el('ul', {}, ...node.children.map(build)))
    return item
  }
  keepingFocus($('trace'), () => $('trace').replaceChildren(build(root)))
  const all = [...nodes.values()]
  const sums =
    stats === undefined
      ? {
          sessions: all.length,
          turnMs: all.reduce((ms, node) => ms + (node.ms ?? 0), 0),
          // A cost is known only when every span's is, as the stats report's is.
          cost: root.costRollup.partial ? null : root.costRollup.usd,
          unpriced: rootRow?.cost === undefined,
          gaps: all.filter((node) => node.row?.kind === 'diagnostic' || node.tokens === null).length,
        }
      : {
          sessions: stats.rollup.sessions,
          turnMs: stats.rollup.totals.turnMs,
          cost: stats.cost?.usd ?? null,
          unpriced: stats.costReason === 'no-price-table',
          gaps: stats.rollup.gaps.length,
        }
  $('trace-summary').textContent =
    `${sums.sessions} sessions, ${fmtTokens(root.rollup)} tokens in all, ${fmtMs(sums.turnMs)} of turns; cost ${fmtCost(sums.cost)}` +
    `${sums.unpriced ? ' (no price table on this server)' : ''}` +
    `${sums.gaps === 0 ? '.' : `; ${sums.gaps} sessions could not be counted, so the sums are a lower bound.`}`
  $('trace-scale').textContent = Number.isFinite(t0) ? `Timeline: ${new Date(t0).toLocaleString()} + ${fmtMs(scale.span)}` : ''
  $('trace-hint').textContent = catalog.rows.length === 0 ? 'This session has no subagents.' : ''
}

/** Shows the trace of `id` (a subagent's through `parentId`). */
export function openTrace(id, parentId) {
  if (id !== trace.id || parentId !== trace.parentId) $('trace').replaceChildren()
  trace.id = id
  trace.parentId = parentId
  load()
}

export function closeTrace() {
  trace.id = undefined
  trace.generation++
}

/** Coalesces bursts of catalog notices (a finishing child ends a turn and goes cold) into one reload. */
export function scheduleTrace() {
  if (trace.id === undefined) return
  clearTimeout(trace.timer)
  trace.timer = setTimeout(load, 100)
}
