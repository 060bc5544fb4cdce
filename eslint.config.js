// One lint setup for the whole workspace. Rules that enforce the architecture:
// services import packages, never each other; no deep imports into another package's
// sources; no import cycles; no floating promises; no console in services and packages.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import importX from 'eslint-plugin-import-x';

const SERVICES = ['ingress', 'registry', 'router', 'dispatcher', 'retry-scheduler', 'dead-letter', 'tracker', 'console'];

export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**', '.reach/**', 'test-artifacts/**', 'packages/envelope/src/generated/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['packages/*/src/**/*.ts', 'services/*/src/**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    plugins: { 'import-x': importX },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      'import-x/no-cycle': 'error',
      'no-console': 'error',
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['**/services/**', ...SERVICES.map((s) => `@reach/${s}`)], message: 'Services never import each other: move shared logic to packages/.' },
            { group: ['@reach/*/src/**', '@reach/*/dist/**', '**/packages/*/src/**'], message: 'Import a package by its name, not its files.' },
          ],
        },
      ],
    },
  },
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
  {
    files: ['scripts/**/*.mjs', '*.js'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
  },
  {
    // The CPU-profile preload is loaded with --require: CommonJS.
    files: ['scripts/**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { process: 'readonly', require: 'readonly', console: 'readonly' } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
