// DOM helpers. Every piece of data reaches the page as a text node or an
// attribute value set through the DOM: nothing is ever parsed as markup.

import { ApiFailure } from './api.js'

export const $ = (id) => document.getElementById(id)

/** Builds an element: `text` sets textContent, `on*` adds listeners, everything else is an attribute; children are nodes or strings (text). */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag)
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue
    if (key === 'class') node.className = value
    else if (key === 'text') node.textContent = value
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value)
    else node.setAttribute(key, value === true ? '' : String(value))
  }
  for (const child of children) if (child !== undefined && child !== null && child !== false) node.append(child)
  return node
}

/**
 * Replaces what `container` shows (`replace`), keeping the keyboard's place:
 * an element focused inside it is found again in the new content (the same
 * item, by its `data-seq` or `data-span-id`, and the same element within it)
 * and focused, so a live update never drops a keyboard user back to the top.
 */
export function keepingFocus(container, replace) {
  const active = document.activeElement
  const keyed = active instanceof Element && container.contains(active) ? active.closest('[data-seq],[data-span-id]') : null
  const item = keyed !== null && container.contains(keyed) ? keyed : null
  const attr = item === null ? undefined : item.hasAttribute('data-seq') ? 'data-seq' : 'data-span-id'
  const key = item?.getAttribute(attr)
  const index = item === null ? -1 : [...item.querySelectorAll('*')].indexOf(active)
  replace()
  if (item === null || !container.isConnected || container.contains(active)) return
  const again = container.querySelector(`[${attr}="${CSS.escape(key)}"]`)
  const target = index === -1 ? again : again?.querySelectorAll('*')[index]
  target?.focus({ preventScroll: true })
}

/** Shows an error in the element `id` (hidden again with `undefined`). */
export function showError(id, error) {
  const node = $(id)
  if (error === undefined) {
    node.hidden = true
    node.textContent = ''
    return
  }
  node.hidden = false
  node.textContent = describe(error)
}

export function describe(error) {
  return error instanceof ApiFailure ? `${error.code}: ${error.message}` : String(error?.message ?? error)
}

/**
 * A search snippet as nodes: `marks` says where each match's `[word]` is;
 * each becomes a <mark> holding a text node, everything else (brackets of
 * the text itself included) plain text.
 */
export function highlighted(snippet, marks) {
  const nodes = []
  let last = 0
  for (const [start, end] of marks) {
    if (start < last || end > snippet.length || end - start < 2) continue
    if (start > last) nodes.push(document.createTextNode(snippet.slice(last, start)))
    nodes.push(el('mark', { text: snippet.slice(start + 1, end - 1) }))
    last = end
  }
  if (last < snippet.length) nodes.push(document.createTextNode(snippet.slice(last)))
  return nodes
}

/** Marks every occurrence of the search terms in `text` (case-insensitive), as text nodes and <mark>s. */
export function markTerms(text, terms) {
  if (terms.length === 0) return [document.createTextNode(text)]
  const lower = text.toLowerCase()
  const nodes = []
  let at = 0
  while (at < text.length) {
    let best = -1
    let length = 0
    for (const term of terms) {
      const found = lower.indexOf(term, at)
      if (found !== -1 && (best === -1 || found < best)) {
        best = found
        length = term.length
      }
    }
    if (best === -1) break
    if (best > at) nodes.push(document.createTextNode(text.slice(at, best)))
    nodes.push(el('mark', { text: text.slice(best, best + length) }))
    at = best + length
  }
  if (at < text.length) nodes.push(document.createTextNode(text.slice(at)))
  return nodes
}

const numberFormat = new Intl.NumberFormat('en')

export const fmtTokens = (n) => (n === null || n === undefined ? '—' : numberFormat.format(n))

export function fmtMs(ms) {
  if (ms === null || ms === undefined) return '—'
  if (ms < 1000) return `${Math.round(ms)} ms`
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`
}

export const fmtCost = (usd) => (usd === null || usd === undefined ? '—' : `$${usd.toFixed(usd < 0.01 ? 4 : 2)}`)

export const fmtDate = (ms) => new Date(ms).toLocaleString()

/** The page's own address with new hash parameters (values are encoded by URLSearchParams). */
export function hashLink(params) {
  const search = new URLSearchParams()
  for (const [key, value] of Object.entries(params)) if (value !== undefined && value !== null) search.set(key, String(value))
  return `#${search}`
}
