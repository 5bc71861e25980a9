{{/* The operator's name, also its ServiceAccount and RBAC objects. */}}
{{- define "butlers.fullname" -}}
{{- printf "%s-operator" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "butlers.labels" -}}
app.kubernetes.io/part-of: butlers
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "butlers.operatorSelector" -}}
app.kubernetes.io/name: butlers-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "butlers.postgresName" -}}
{{- printf "%s-postgres" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The Secret (and key) holding the PostgreSQL admin DSN. */}}
{{- define "butlers.adminSecret" -}}
{{- if .Values.postgres.enabled -}}
{{- printf "%s-admin" (include "butlers.postgresName" .) -}}
{{- else -}}
{{- required "database.adminSecret.name is required unless postgres.enabled is true" .Values.database.adminSecret.name -}}
{{- end -}}
{{- end -}}

{{/* Every namespace the operator serves in namespaced mode (the release's first). */}}
{{- define "butlers.namespaces" -}}
{{- $all := prepend .Values.watch.namespaces .Release.Namespace | uniq -}}
{{- join "," $all -}}
{{- end -}}
