// A transcript: stored events as readable items. Messages show their content
// blocks; reasoning, tool arguments and results are collapsed (<details>);
// errors are marked; compaction markers name the range they shadow and link
// to it. Every item carries its seq and a deep link of its own.

import { attachmentUrl } from './api.js'
import { el, fmtTokens, hashLink } from './dom.js'

const json = (value) => JSON.stringify(value, null, 2) ?? String(value)

function pre(text) {
  return el('pre', { class: 'code', text })
}

function usageText(usage) {
  if (usage === null || typeof usage !== 'object') return undefined
  const total = ['input', 'output', 'cacheRead', 'cacheWrite', 'reasoning'].reduce((n, k) => n + (Number(usage[k]) || 0), 0)
  return `${fmtTokens(total)} tokens`
}

/** Renders content blocks (text, reasoning, images, files, tool calls and results); an unknown block shows as JSON. */
function blocksOf(blocks, ctx) {
  const nodes = []
  for (const block of blocks) {
    if (block === null || typeof block !== 'object') continue
    switch (block.type) {
      case 'text':
        nodes.push(el('p', { class: 'text', text: String(block.text ?? '') }))
        break
      case 'reasoning':
        nodes.push(
          el(
            'details',
            { class: 'reasoning' },
            el('summary', { text: 'Reasoning' }),
            el('p', { class: 'text', text: String(block.text ?? '') }),
          ),
        )
        break
      case 'image':
        nodes.push(attachmentNode(block.attachment, ctx, true))
        break
      case 'file':
        nodes.push(attachmentNode(block.attachment, ctx, false))
        break
      case 'tool-call':
        nodes.push(toolCall(String(block.name ?? '?'), block.id, block.input))
        break
      case 'tool-result':
        nodes.push(toolResult(block.callId, block.content, block.isError === true, ctx))
        break
      default:
        nodes.push(el('details', { class: 'unknown' }, el('summary', { text: `${String(block.type)} block` }), pre(json(block))))
    }
  }
  return nodes
}

function attachmentNode(ref, ctx, image) {
  if (ref === null || typeof ref !== 'object' || typeof ref.digest !== 'string')
    return el('p', { class: 'error', text: 'An attachment without a valid reference.' })
  const name = typeof ref.name === 'string' ? ref.name : `${String(ref.mediaType ?? 'file')} (${ref.size ?? '?'} bytes)`
  const src = attachmentUrl(ctx.id, ctx.parentId, ref.digest)
  if (image) {
    const img = el('img', { src, alt: name, loading: 'lazy', class: 'attachment', 'data-digest': ref.digest })
    img.addEventListener('error', () => img.replaceWith(el('p', { class: 'error', text: `Image ${name} is unavailable.` })))
    return el('figure', {}, img, el('figcaption', { text: name }))
  }
  return el('p', {}, el('a', { href: src, download: name, text: `Attachment: ${name}` }))
}

function toolCall(name, callId, input) {
  return el(
    'details',
    { class: 'tool-call', 'data-call-id': callId },
    el('summary', {}, 'Tool call ', el('code', { text: name })),
    pre(typeof input === 'string' ? input : json(input)),
  )
}

function toolResult(callId, content, isError, ctx) {
  const body =
    Array.isArray(content) && content.every((b) => b && typeof b === 'object' && typeof b.type === 'string')
      ? blocksOf(content, ctx)
      : [pre(typeof content === 'string' ? content : json(content))]
  return el(
    'details',
    { class: isError ? 'tool-result error' : 'tool-result', 'data-call-id': callId, open: isError },
    el('summary', {}, isError ? 'Tool error' : 'Tool result', ' ', el('code', { text: String(callId ?? '') })),
    ...body,
  )
}

function rangeLink(ctx, from, to) {
  return el('a', { href: hashLink({ session: ctx.id, parent: ctx.parentId, event: from }), text: `events ${from}–${to - 1}` })
}

function shadowed(ctx, data) {
  if (Number.isInteger(data.from) && Number.isInteger(data.to) && data.to > data.from) return rangeLink(ctx, data.from, data.to)
  const range = data.shadowedRange
  if (range && Number.isInteger(range.start) && Number.isInteger(range.end)) return rangeLink(ctx, range.start, range.end + 1)
  if (Array.isArray(data.shadowedSeqs)) return `${data.shadowedSeqs.length} events`
  if (Array.isArray(data.callIds)) return `${data.callIds.length} tool results`
  return 'an unnamed range'
}

/** The body of one event, and its role (the item's class). */
function eventBody(event, ctx, mirrored) {
  const data = event.data && typeof event.data === 'object' ? event.data : {}
  switch (event.type) {
    case 'user/message':
      return {
        role: 'user',
        label: 'User',
        nodes: Array.isArray(data.blocks) ? blocksOf(data.blocks, ctx) : [el('p', { class: 'text', text: String(data.text ?? '') })],
      }
    case 'assistant/message': {
      const nodes = Array.isArray(data.blocks) ? blocksOf(data.blocks, ctx) : [el('p', { class: 'text', text: String(data.text ?? '') })]
      const meta = [data.model, usageText(data.usage)].filter(Boolean).join(' · ')
      return { role: 'assistant', label: 'Assistant', meta, nodes }
    }
    case 'tool/call':
      if (mirrored.has(data.callId)) return undefined
      return { role: 'tool', label: 'Tool call', nodes: [toolCall(String(data.name ?? '?'), data.callId, data.arguments)] }
    case 'tool/result':
      return {
        role: data.isError === true ? 'tool error' : 'tool',
        label: data.isError === true ? 'Tool error' : 'Tool result',
        nodes: [toolResult(data.callId, Array.isArray(data.blocks) ? data.blocks : data.content, data.isError === true, ctx)],
      }
    case 'turn/start':
      return { role: 'marker', label: `Turn ${data.turn ?? '?'} started`, nodes: [] }
    case 'turn/end': {
      const failed = data.reason !== 'completed'
      return {
        role: failed ? 'marker error' : 'marker',
        label: `Turn ${data.turn ?? '?'} ${failed ? `ended: ${String(data.reason)}` : 'completed'}`,
        nodes: [],
      }
    }
    case 'step/start':
      return { role: 'marker', label: `Model call${data.model ? `: ${data.model}` : ''}`, nodes: [] }
    case 'step/end': {
      const failed = data.finish === 'error' || data.finish === 'aborted'
      const label = [`Model call ended${data.finish ? ` (${data.finish})` : ''}`, usageText(data.usage)].filter(Boolean).join(' · ')
      return { role: failed ? 'marker error' : 'marker', label, nodes: [] }
    }
    case 'compaction/start':
      return { role: 'compaction', label: `Compaction started${data.reason ? `: ${data.reason}` : ''}`, nodes: [] }
    case 'compaction/summary':
      return {
        role: 'compaction',
        label: 'Compaction summary',
        nodes: [
          el('p', {}, 'Shadows ', shadowed(ctx, data), '.'),
          el(
            'details',
            { class: 'summary' },
            el('summary', { text: 'Summary' }),
            ...blocksOf(Array.isArray(data.summary) ? data.summary : [], ctx),
          ),
        ],
      }
    case 'compaction/end':
      return typeof data.error === 'string'
        ? { role: 'compaction error', label: `Compaction failed: ${data.error}`, nodes: [] }
        : { role: 'compaction', label: 'Compaction applied', nodes: [] }
    case 'compaction/prune':
      return { role: 'compaction', label: 'Tool results pruned', nodes: [el('p', {}, 'Shadows ', shadowed(ctx, data), '.')] }
    default: {
      const elided = data.elided
      if (elided && typeof elided === 'object')
        return {
          role: 'marker error',
          label: `A ${String(elided.type)} event of ${fmtTokens(elided.bytes)} bytes is not shown (${String(elided.reason)}).`,
          nodes: [],
        }
      return { role: 'other', label: event.type, nodes: [el('details', {}, el('summary', { text: 'Data' }), pre(json(event.data)))] }
    }
  }
}

/** Streamed chunks are folded into the assistant message that follows them; chunks without one yet show as streaming text. */
function streaming(events) {
  const finished = new Set(events.filter((e) => e.type === 'assistant/message').map((e) => e.data?.turn))
  const groups = new Map()
  for (const event of events) {
    if (event.type !== 'assistant/chunk' || finished.has(event.data?.turn)) continue
    const key = event.data?.turn
    const group = groups.get(key) ?? { first: event, text: '' }
    group.text += String(event.data?.delta ?? '')
    groups.set(key, group)
  }
  return new Map([...groups.values()].map((group) => [group.first.seq, group.text]))
}

/** Renders `events` (ascending) as <li> items for session `ctx = { id, parentId }`. */
export function renderEvents(events, ctx) {
  const mirrored = new Set()
  for (const event of events)
    if (event.type === 'assistant/message' && Array.isArray(event.data?.blocks))
      for (const block of event.data.blocks) if (block?.type === 'tool-call') mirrored.add(block.id)
  const partial = streaming(events)
  const items = []
  for (const event of events) {
    let body
    if (event.type === 'assistant/chunk') {
      if (!partial.has(event.seq)) continue
      body = {
        role: 'assistant streaming',
        label: 'Assistant (writing…)',
        nodes: [el('p', { class: 'text', text: partial.get(event.seq) })],
      }
    } else body = eventBody(event, ctx, mirrored)
    if (body === undefined) continue
    const anchor = el('a', {
      class: 'seq',
      href: hashLink({ session: ctx.id, parent: ctx.parentId, event: event.seq }),
      'aria-label': `Link to event ${event.seq}`,
      text: `#${event.seq}`,
    })
    const head = el(
      'div',
      { class: 'event-head' },
      el('span', { class: 'who', text: body.label }),
      body.meta ? el('span', { class: 'meta', text: body.meta }) : undefined,
      el('time', { text: new Date(event.time).toLocaleTimeString() }),
      anchor,
    )
    items.push(
      el(
        'li',
        { id: `ev-${event.seq}`, class: `event ${body.role}`, 'data-seq': String(event.seq), 'data-type': event.type },
        head,
        ...body.nodes,
      ),
    )
  }
  return items
}
