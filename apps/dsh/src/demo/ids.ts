/** Readable, fixed ids so the demo's output can be followed (and compared across runs). */
export const DEMO_IDS = {
  parent: 'release-1.4',
  corrupt: 'release-1.4.log-summarizer',
  crashed: 'release-1.4.migration-runner',
  researcher: 'release-1.4.researcher',
  reviewer: 'release-1.4.reviewer',
  planner: 'release-1.4.planner',
  factChecker: 'release-1.4.planner.fact-checker',
} as const
