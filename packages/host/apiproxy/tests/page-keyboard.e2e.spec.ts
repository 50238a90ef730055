import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { launchChromium, seriousViolations } from '@dsh/test-kit/browser'
import type { BrowserContext, Page } from 'playwright-core'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { type Stack, startStack, turn } from './support/stack.js'

// The catalog page driven by the keyboard alone (Tab, Shift+Tab, Enter,
// Space) in a real headless Chromium: search, a second list page, a session
// from the list, collapsed reasoning and a tool call, the trace tab and a
// child's transcript from its span. Every step is checked by DOM state: the
// focused element, <details> open, the address's hash. The page routes on
// `hashchange`, a task of its own after the hash changes, so a check of what
// routing does first waits for the view routing shows.

/** More top-level sessions than one list page (50) holds, so the list has a next page. */
const FILLERS = 55
/** Tab presses allowed to reach one element: bounds a walk that would otherwise never end. */
const MAX_TABS = 200
let stack: Stack
let userDataDir: string
let browser: BrowserContext
let page: Page

beforeAll(async () => {
  // On disk with the SQLite query index, as `dsh serve` runs: search needs the index.
  stack = await startStack({ backend: 'disk' })
  const { sessions, subagents } = stack
  const parent = sessions.create({ id: 'parent' })
  turn(parent, 'plan the work')
  await subagents.spawn(parent, { mode: 'one-shot', label: 'summarizer', context: 'fresh', prompt: 'summarize', id: 'child' }).done
  const rich = sessions.create({ id: 'rich' })
  rich.append('turn/start', { turn: 1 })
  rich.append('user/message', { text: 'read the file' })
  rich.append('assistant/message', {
    turn: 1,
    text: 'Reading it.',
    blocks: [
      { type: 'reasoning', text: 'The file is small.' },
      { type: 'text', text: 'Reading it.' },
      { type: 'tool-call', id: 'call-1', name: 'read_file', input: { path: '/tmp/notes' } },
    ],
  })
  rich.append('tool/result', { turn: 1, callId: 'call-1', content: 'the notes' })
  rich.append('turn/end', { turn: 1, reason: 'completed' })
  // Created after the others, so they follow them in the list.
  for (let i = 0; i < FILLERS; i++) turn(sessions.create({ id: `z-filler-${String(i).padStart(2, '0')}` }), `filler ${i}`)
  userDataDir = mkdtempSync(join(tmpdir(), 'dsh-chromium-'))
  browser = await launchChromium(userDataDir)
  page = browser.pages()[0] ?? (await browser.newPage())
})

afterAll(async () => {
  await browser?.close()
  await stack?.close()
  if (userDataDir) rmSync(userDataDir, { recursive: true, force: true })
})

// Evaluated in the page as text: this package's TypeScript has no DOM types.
const focusedMatches = (selector: string) =>
  page.evaluate(`document.activeElement?.matches(${JSON.stringify(selector)}) === true`) as Promise<boolean>
const focusedId = () => page.evaluate(`document.activeElement?.id ?? ''`) as Promise<string>
const hash = () => page.evaluate('decodeURIComponent(location.hash)') as Promise<string>
const focusedRow = () => page.evaluate(`document.activeElement?.closest('tr')?.getAttribute('data-session-id')`) as Promise<string>

/** Presses Tab (Shift+Tab with `back`) until the focused element matches `selector`; answers the presses it took. */
async function tabTo(selector: string, back = false): Promise<number> {
  for (let presses = 1; presses <= MAX_TABS; presses++) {
    await page.keyboard.press(back ? 'Shift+Tab' : 'Tab')
    if (await focusedMatches(selector)) return presses
  }
  throw new Error(`${MAX_TABS} presses of ${back ? 'Shift+Tab' : 'Tab'} never reached ${selector}`)
}

const isOpen = (selector: string) => page.locator(selector).evaluate((node) => (node as unknown as { open: boolean }).open)

it('reaches and operates search, paging, a session, its collapsed blocks, the trace and a child with the keyboard alone', async () => {
  await page.goto(stack.server.pageUrl)
  await page.locator('#sessions tr[data-session-id="parent"]').waitFor()
  await page.locator('#more-sessions:not([hidden])').waitFor()

  // The search box: type, Enter runs the search; Shift+Tab walks back from its button to it.
  await tabTo('#search')
  await page.keyboard.type('summarize')
  await page.keyboard.press('Enter')
  await page.locator('#search-hits li[data-hit-session="child"]').first().waitFor()
  expect(await focusedId()).toBe('search')
  await tabTo('#search-form button[type="submit"]')
  await tabTo('#search', true)
  // The hit's link is reachable too; Clear (a button, Space) empties the results.
  await tabTo('#search-hits li[data-hit-session="child"] a')
  await tabTo('#search-clear', true)
  await page.keyboard.press('Space')
  await page.locator('#search-results[hidden]').waitFor({ state: 'attached' })

  // The next list page: Enter on "More sessions", and the keyboard continues from its first new row.
  await tabTo('#more-sessions')
  const before = await page.locator('#sessions tbody tr').count()
  await page.keyboard.press('Enter')
  await page.locator('#sessions tr[data-session-id="z-filler-54"]').waitFor()
  expect(await page.locator('#sessions tbody tr').count()).toBe(FILLERS + 2)
  expect(await focusedMatches('#sessions tbody tr td.title a')).toBe(true)
  const firstNew = await focusedRow()
  expect(await page.locator('#sessions tbody tr').nth(before).getAttribute('data-session-id')).toBe(firstNew)

  // Back up the list to a session's link; Enter opens its transcript and focus moves to its heading.
  await tabTo('#sessions tr[data-session-id="rich"] td.title a', true)
  await page.keyboard.press('Enter')
  expect(await hash()).toBe('#session=rich')
  await page.locator('#transcript li[data-type="assistant/message"]').waitFor()
  expect(await focusedId()).toBe('session-title')

  // Collapsed reasoning opens with Enter, the collapsed tool call with Space.
  expect(await isOpen('#transcript details.reasoning')).toBe(false)
  await tabTo('#transcript details.reasoning > summary')
  // A live update re-renders the transcript meanwhile: the keyboard keeps its place.
  const shown = Number(await page.locator('#transcript').getAttribute('data-count'))
  turn(stack.sessions.get('rich')!, 'one more thing')
  await page.locator(`#transcript:not([data-count="${shown}"])`).waitFor({ state: 'attached' })
  expect(await focusedMatches('#transcript details.reasoning > summary')).toBe(true)
  await page.keyboard.press('Enter')
  expect(await isOpen('#transcript details.reasoning')).toBe(true)
  expect(await isOpen('#transcript details.tool-call')).toBe(false)
  await tabTo('#transcript details.tool-call > summary')
  await page.keyboard.press('Space')
  expect(await isOpen('#transcript details.tool-call')).toBe(true)
  expect(await seriousViolations(page)).toEqual([])

  // Back to the list (its link sits above the transcript), then the parent session and its trace tab.
  await tabTo('#session-view a[href="#list"]', true)
  await page.keyboard.press('Enter')
  expect(await hash()).toBe('#list')
  await page.locator('#list-view:not([hidden])').waitFor()
  expect(await focusedId()).toBe('sessions-title')
  await tabTo('#sessions tr[data-session-id="parent"] td.title a')
  await page.keyboard.press('Enter')
  expect(await hash()).toBe('#session=parent')
  await page.locator('#session-view:not([hidden])').waitFor()
  await tabTo('#tab-trace')
  await page.keyboard.press('Enter')
  expect(await hash()).toBe('#session=parent&view=trace')
  await page.locator('#trace-pane:not([hidden])').waitFor()
  expect(await focusedId()).toBe('tab-trace')
  expect(await page.locator('#tab-trace').getAttribute('aria-current')).toBe('page')

  // A child's span opens its transcript through its parent.
  await page.locator('#trace li[data-span-id="child"]').waitFor()
  await tabTo('#trace li[data-span-id="child"] a.span-name')
  await page.keyboard.press('Enter')
  expect(await hash()).toBe('#session=child&parent=parent')
  await page.locator('#transcript li', { hasText: 'finished summarize' }).first().waitFor()
  expect(await focusedId()).toBe('session-title')
  expect(await seriousViolations(page)).toEqual([])
})
