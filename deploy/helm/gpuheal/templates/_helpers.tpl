{{/* Base name: the release name when it contains "gpuheal", else "<release>-gpuheal". */}}
{{- define "gpuheal.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "gpuheal.agent" -}}{{ include "gpuheal.fullname" . }}-agent{{- end -}}
{{- define "gpuheal.controller" -}}{{ include "gpuheal.fullname" . }}-controller{{- end -}}

{{- define "gpuheal.labels" -}}
app.kubernetes.io/part-of: gpuheal
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "gpuheal.agent.labels" -}}
{{ include "gpuheal.labels" . }}
app.kubernetes.io/name: gpuheal-agent
app.kubernetes.io/component: agent
{{- end -}}
{{- define "gpuheal.agent.selector" -}}
app.kubernetes.io/name: gpuheal-agent
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gpuheal.controller.labels" -}}
{{ include "gpuheal.labels" . }}
app.kubernetes.io/name: gpuheal-controller
app.kubernetes.io/component: controller
{{- end -}}
{{- define "gpuheal.controller.selector" -}}
app.kubernetes.io/name: gpuheal-controller
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gpuheal.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "gpuheal.tokenSecret" -}}
{{- .Values.ingestToken.existingSecret | default (printf "%s-ingest-token" (include "gpuheal.fullname" .)) -}}
{{- end -}}

{{/* Controller replicas: SQLite on a volume allows one writer only. */}}
{{- define "gpuheal.controller.replicas" -}}
{{- if and (eq .Values.controller.db.type "sqlite") .Values.controller.db.sqlite.persistence.enabled -}}
1
{{- else -}}
{{ .Values.controller.replicas }}
{{- end -}}
{{- end -}}

{{- define "gpuheal.controller.db" -}}
{{- if eq .Values.controller.db.type "sqlite" -}}
sqlite:{{ .Values.controller.db.sqlite.path }}
{{- else if eq .Values.controller.db.type "postgres" -}}
{{- required "controller.db.postgres.url is required with controller.db.type=postgres" .Values.controller.db.postgres.url -}}
{{- else -}}
{{- fail (printf "controller.db.type must be sqlite or postgres, not %q" .Values.controller.db.type) -}}
{{- end -}}
{{- end -}}
