// The live connection: one EventSource on the top-level session on view.
// EventSource retries a dropped connection itself; when it gives up (the
// server answered with an error while restarting) the page opens a new one
// after a growing pause, so a server restart heals without a reload.
// `ready` follows every (re)connection: listeners refetch what they show.

import { streamUrl } from './api.js'
import { $ } from './dom.js'

const listeners = new Set()
/** Who holds each session's writer lock, as the stream last said (`written`): `other-process`, `this-process` or `none`. */
const writers = new Map()

/** The writer the stream last reported for `id`, or `undefined` when it reported none. */
export const writerOf = (id) => writers.get(id)
let source
let sessionId
let retryTimer
let retryMs = 500

function setStatus(text, state) {
  const status = $('status')
  status.textContent = text
  status.setAttribute('data-state', state)
}

function open() {
  source?.close()
  clearTimeout(retryTimer)
  if (sessionId === undefined) {
    setStatus('not connected', 'idle')
    return
  }
  const current = new EventSource(streamUrl(sessionId))
  source = current
  setStatus('connecting…', 'idle')
  const emit = (kind) => (message) => {
    if (source !== current) return
    let data
    try {
      data = JSON.parse(message.data)
    } catch {
      return
    }
    for (const listener of listeners) listener(kind, data)
  }
  current.addEventListener('ready', (message) => {
    retryMs = 500
    setStatus('live', 'open')
    emit('ready')(message)
  })
  current.addEventListener('projection', emit('projection'))
  current.addEventListener('catalog', emit('catalog'))
  current.addEventListener('written', (message) => {
    try {
      const data = JSON.parse(message.data)
      writers.set(data.id, data.writer)
    } catch {
      return
    }
    emit('written')(message)
  })
  current.addEventListener('error', () => {
    if (source !== current) return
    if (current.readyState === EventSource.CLOSED) {
      setStatus('reconnecting…', 'error')
      retryTimer = setTimeout(open, retryMs)
      retryMs = Math.min(retryMs * 2, 10_000)
    } else setStatus('reconnecting…', 'error')
  })
}

/** Streams `id`'s changes (or none with `undefined`); keeps the open stream when it already is that session's. */
export function follow(id) {
  if (id === sessionId && source !== undefined && source.readyState !== EventSource.CLOSED) return
  sessionId = id
  retryMs = 500
  open()
}

/** `listener(kind, data)` for `ready`, `projection`, `catalog` and `written` messages; returns the unsubscribe. */
export function onLive(listener) {
  listeners.add(listener)
  return () => listeners.delete(listener)
}
