export { default } from './vitest.preset.ts'
